#!/usr/bin/env bash
# The whole check on a GPU machine (one H100 or H200 with PyTorch 2.11 + CUDA 13,
# nvcc, CMake and ninja, but none of our Debian packages and no network), in
# stages that each fit a time limit, so a ten-minute call can run some of them
# and a second call the rest:
#   scripts/device_check.sh OUT_DIR [build] [test] [suite] [run] [bench] [batch] [calibrate] [fused] [sanitize]
#   (default: build test run bench suite)
# build  unpack third_party_debs (scripts/gather_gpu_deps.sh, carried with the
#        working tree) into SJD_DEPS_PREFIX and build everything with all cores
#        through scripts/setup.sh
# test   tests_cuda; where its cases of code new to the device fail, the later
#        stages run with that code switched off (SJD_FUSED_LAYER_OPS=0, ...)
# suite  the whole CTest suite (of the build, or the prebuilt suite.tar.gz)
# run    sjd generate / batch / compare on models/default with --device cuda in
#        bf16 and f32, and the f32 tokens of CUDA against the CPU's
# bench  scripts/bench_gpu.sh at each full-size preset, one preset at a time
# batch  batched decoding on the GPU (issue 16): whether fixed windows give the
#        same pixels and steps at B = 1, 2 (refills) and 4, in f32 and bf16, then
#        images/s of sjd batch against B (scripts/bench_batch.sh); output in run.log
# calibrate  the default model's step-cost profiles on this device in bf16 and f32
#        (sjd bench --calibrate), printed into results.md for the bundle's
#        step_cost (automatic windows on CUDA then plan from measured steps)
# fused  the layer's fused kernels against the ATen ops they replace, and the window
#        attention (CUDA-core and tensor-core kernels) against PyTorch's: sjd bench at
#        the Lumina preset (AR, L = 64 and tree steps) with all on, with
#        SJD_WIDE_WINDOW_ATTENTION=0, with SJD_WINDOW_ATTENTION=0, and with all off,
#        and the tree verification over listed ids against SJD_SPARSE_TREE_VERIFY=0,
#        side by side in results.md; its output goes to bench.log
# sanitize  compute-sanitizer over tests_cuda's kernel-level cases: memcheck once over
#        all of them, racecheck on each kernel with shared memory (the barriers were
#        checked by reading only); verdicts and hazard counts in results.md, output
#        in test.log
# A later stage builds first when the build folder has no sjd (a fresh machine).
# With SJD_PREBUILT=build-prebuilt (sjd and tests_cuda built on a CPU machine by
# scripts/cuda_build_check.sh, carried with the call) `build` only unpacks the
# libraries and checks that the binaries load; `suite` then runs the whole CTest
# suite that the prebuilt folder has (suite.tar.gz, packed after a full CUDA build
# by scripts/pack_prebuilt.sh), so no call has to build.
# OUT_DIR gets results.md (machine, then one section per stage, written as each
# stage ends) and at most 8 files of logs and archives, each kept under 16 MiB;
# a CUDA build also leaves prebuilt.tar.gz, its binaries for the next call.
# Environment: SJD_BUILD_DIR (default build-gpu), SJD_DEPS_PREFIX (default
#   /tmp/sjd-deps), SJD_JOBS (default nproc), SJD_CHECK_DEVICE (cuda; cpu makes a
#   dry run on a machine without a GPU: --device cpu, the tiny bench preset),
#   SJD_CHECK_CTEST_ARGS (extra ctest arguments, e.g. "-R text"),
#   SJD_CHECK_LIMITS (seconds per stage, default "build=300 test=150 suite=300 run=150 bench=330 batch=240
#   calibrate=120 fused=180 sanitize=240"),
#   SJD_CHECK_TOTAL (seconds for the whole call, default 540: no stage runs past
#   it, so the device tool's 600 s leave time to pack and print the results),
#   SJD_PREBUILT (above), PYTHON (default python3: the Python whose torch is used),
#   SJD_COMMIT (the commit results.md names where the copy has no .git).
# Exit code: 0 when every command it ran succeeded, 1 when one failed or ran out of time.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/device_check.sh OUT_DIR [build] [test] [suite] [run] [bench] [batch] [calibrate] [fused]" \
       "[sanitize]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
out=$1; shift
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(build test run bench suite)
for s in "${stages[@]}"; do
  case "$s" in build|test|suite|run|bench|batch|calibrate|fused|sanitize) ;; *) echo "device_check: unknown stage '$s'" >&2; usage ;; esac
done
device=${SJD_CHECK_DEVICE:-cuda}
case "$device" in cuda|cpu) ;; *) echo "device_check: SJD_CHECK_DEVICE must be cuda or cpu, not '$device'" >&2; exit 2 ;; esac
declare -A limit=([build]=300 [test]=150 [suite]=300 [run]=150 [bench]=330 [batch]=240 [calibrate]=120 [fused]=180
                  [sanitize]=240)
total=${SJD_CHECK_TOTAL:-540}
[[ "$total" =~ ^[0-9]+$ ]] || { echo "device_check: SJD_CHECK_TOTAL must be seconds, not '$total'" >&2; exit 2; }
call_deadline=$(( $(date +%s) + total ))
for pair in ${SJD_CHECK_LIMITS:-}; do
  key=${pair%%=*} value=${pair#*=}
  [[ -n "${limit[$key]:-}" && "$value" =~ ^[0-9]+$ ]] ||
    { echo "device_check: bad SJD_CHECK_LIMITS entry '$pair' (stage=seconds)" >&2; exit 2; }
  limit[$key]=$value
done

export SJD_BUILD_DIR=${SJD_BUILD_DIR:-build-gpu}
# tests_cuda run by hand (the test stage) find the tree's models here, not at the build machine's
# path compiled into prebuilt binaries; CTest's runs set their own.
export SJD_SOURCE_DIR=$PWD
export SJD_DEPS_PREFIX=${SJD_DEPS_PREFIX:-/tmp/sjd-deps}
export SJD_JOBS=${SJD_JOBS:-$(nproc)}
export PYTHON=${PYTHON:-python3}
export PYTHONUNBUFFERED=1   # a Python stopped by `timeout` keeps what it printed
# DejaVu Sans labels compare.png; a machine without Debian's fonts-dejavu-core
# gets the copy gathered with the libraries (scripts/gather_gpu_deps.sh).
system_font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
if [ -z "${SJD_FONT:-}" ] && [ ! -f "$system_font" ]; then
  export SJD_FONT=$(realpath -m "$SJD_DEPS_PREFIX")$system_font   # absolute: CTest runs in the build folder
fi
prebuilt=${SJD_PREBUILT:-}
if [ -n "$prebuilt" ]; then
  [ -x "$prebuilt/sjd" ] || { echo "device_check: SJD_PREBUILT=$prebuilt has no sjd" >&2; exit 2; }
  export SJD_BUILD_DIR=$prebuilt   # scripts/bench_gpu.sh runs $SJD_BUILD_DIR/sjd
  # Built elsewhere: the machine's torch, its CUDA runtime and the unpacked
  # libraries are found through LD_LIBRARY_PATH, not the binaries' own paths.
  torch_libs=$("$PYTHON" -c 'import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
cudart = sorted(glob.glob(site + "/nvidia/**/libcudart.so.[0-9]*", recursive=True))
print(":".join([os.path.join(os.path.dirname(torch.__file__), "lib")] + [os.path.dirname(p) for p in cudart[:1]]))')
  export LD_LIBRARY_PATH=$torch_libs:$SJD_DEPS_PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
build=$SJD_BUILD_DIR
mkdir -p "$out"
out=$(realpath "$out")
work=$(mktemp -d /tmp/sjd-check.XXXXXX)   # everything not kept; archived into OUT_DIR
suite=$(mktemp -d /tmp/sjd-suite.XXXXXX)  # the prebuilt CTest suite, unpacked: never archived
trap 'rm -rf "$work" "$suite"' EXIT
results=$out/results.md
max_log_bytes=$((12 * 1024 * 1024))

# --- helpers -----------------------------------------------------------------
md() { printf '%s\n' "$*" >> "$results"; }

# Keeps a log under the 16 MiB a returned file may have: its head and its tail.
cap_log() {
  local file=$1
  [ -f "$file" ] && [ "$(stat -c %s "$file")" -gt "$max_log_bytes" ] || return 0
  { head -c 1048576 "$file"; printf '\n[... cut to fit ...]\n'; tail -c $((max_log_bytes - 2097152)) "$file"; } > "$file.cut"
  mv "$file.cut" "$file"
}

stage_deadline=0
# What is left of the stage, and never more than what is left of the call.
seconds_left() {
  local end=$stage_deadline
  [ "$call_deadline" -lt "$end" ] && end=$call_deadline
  echo $(( end - $(date +%s) ))
}
failures=0
tests_cuda_loads=1   # 0 once the build stage found a library of the prebuilt tests_cuda missing

# limited SECONDS LOG CMD...: runs CMD with output appended to LOG, stopped at
# SECONDS or at the stage's deadline, whichever comes first. Sets $rc (CMD's exit
# code), $took and $outcome: ok, failed, timed_out, or no_time when the stage had
# no time left to start CMD. A timeout is told by the time taken, not the code:
# Catch2 exits with its count of failed checks, and 124 of them are not a timeout.
no_time=200
outcome=ok
limited() {
  local seconds=$1 log=$2; shift 2
  local left; left=$(seconds_left)
  [ "$left" -lt "$seconds" ] && seconds=$left
  local start; start=$(date +%s)
  if [ "$seconds" -le 0 ]; then
    echo "device_check: no time left in the stage or the call for: $*" >> "$log"; rc=$no_time; took=0
    outcome=no_time; failures=$((failures + 1)); return
  fi
  echo "\$ $*" >> "$log"
  timeout --kill-after=10 "$seconds" "$@" >> "$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  echo "[exit $rc after ${took} s]" >> "$log"
  if [ "$rc" -eq 0 ]; then
    outcome=ok
  elif { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && [ "$took" -ge "$seconds" ]; then
    outcome=timed_out
  else
    outcome=failed
  fi
  [ "$rc" -eq 0 ] || failures=$((failures + 1))
}

verdict() {  # verdict: the words results.md uses for the last limited command
  case "$outcome" in
    ok) echo ok ;;
    timed_out) echo "TIMED OUT" ;;
    no_time) echo "not run (the stage's or the call's time was up)" ;;
    *) echo "FAILED (exit $rc)" ;;
  esac
}

# --- machine -------------------------------------------------------------------
machine() {
  md "# device_check $(date -u '+%Y-%m-%d %H:%M UTC')"
  md ""
  md "- stages: ${stages[*]} (limits in seconds: $(for s in "${stages[@]}"; do printf '%s=%s ' "$s" "${limit[$s]}"; done | sed 's/ $//'))"
  local commit
  if [ -n "${SJD_COMMIT:-}" ]; then   # named by the caller: the device tool's copy may hold an older .git
    commit="$SJD_COMMIT (SJD_COMMIT)"
  elif commit=$(git rev-parse HEAD 2>/dev/null); then
    git diff --quiet 2>/dev/null || commit="$commit (with local changes)"
  else
    commit="${SJD_COMMIT:-unknown} (no .git here; SJD_COMMIT)"
  fi
  md "- commit: $commit"
  md "- gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo none)"
  md "- torch: $("$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1)"
  md "- nvcc: $( (${CUDACXX:-/usr/local/cuda/bin/nvcc} --version || nvcc --version) 2>/dev/null | grep -o 'release .*')"
  md "- c++: $(c++ --version 2>/dev/null | head -1 || echo none); cmake: $(cmake --version 2>/dev/null | head -1); ninja: $(ninja --version 2>/dev/null || echo none)"
  local libstdcxx  # ldconfig lives in /sbin, which a plain user's PATH may lack
  libstdcxx=$(PATH=$PATH:/sbin:/usr/sbin ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
  md "- os: $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}"), $(nproc) cores, glibc $(ldd --version 2>/dev/null | head -1 | grep -o '[0-9.]*$'), libstdc++ up to $(grep -ao 'GLIBCXX_3\.4\.[0-9]*' "${libstdcxx:-/nonexistent}" 2>/dev/null | sort -V | tail -1)"
  md "- device: $device; build folder: $build; deps prefix: $SJD_DEPS_PREFIX"
  md ""
}

# --- stages --------------------------------------------------------------------
# The carried binaries: unpack the libraries, check that everything they need
# is found and that the program starts.
stage_prebuilt() {
  local log=$out/build.log
  rm -f "$SJD_DEPS_PREFIX/.sjd-prebuilt-loads"   # these binaries are checked afresh, whatever an earlier call found
  md "## build (prebuilt: $prebuilt)"
  sed 's/^/    /' "$prebuilt/BUILD_INFO" >> "$results" 2>/dev/null
  limited 60 "$log" scripts/unpack_deps.sh "${SJD_DEPS_DEBS:-third_party_debs}" "$SJD_DEPS_PREFIX"
  [ "$rc" -eq 0 ] || { md "$(verdict): unpacking the libraries; log build.log"; return 1; }
  # What ldd says now: the log may hold an earlier call's lines.
  local offset missing=0; offset=$(stat -c %s "$log" 2>/dev/null || echo 0)
  limited 30 "$log" ldd "$prebuilt/sjd"
  if tail -c +$((offset + 1)) "$log" | grep -q 'not found'; then missing=1; fi
  limited 30 "$log" "$prebuilt/sjd" --help
  if [ "$missing" -ne 0 ] || [ "$rc" -ne 0 ]; then
    # A missing library leaves ldd's exit code 0 (a failed --help is counted).
    [ "$rc" -ne 0 ] || failures=$((failures + 1))
    md "FAILED: the prebuilt sjd does not load here (see build.log); build on the machine instead (no SJD_PREBUILT)"
    tail -c +$((offset + 1)) "$log" | grep 'not found' | sort -u | sed 's/^/    /' >> "$results"
    md ""; return 1
  fi
  touch "$SJD_DEPS_PREFIX/.sjd-prebuilt-loads"
  # tests_cuda alone not loading fails the test stage, not the stages that need only sjd.
  offset=$(stat -c %s "$log")
  [ -f "$prebuilt/tests/tests_cuda" ] && limited 30 "$log" ldd "$prebuilt/tests/tests_cuda"
  if tail -c +$((offset + 1)) "$log" | grep -q 'not found'; then
    failures=$((failures + 1))
    tests_cuda_loads=0
    md "FAILED: the prebuilt tests_cuda does not load here (see build.log); sjd does, and the other stages run"
    tail -c +$((offset + 1)) "$log" | grep 'not found' | sort -u | sed 's/^/    /' >> "$results"
  else
    md "ok: every library found, sjd starts; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  fi
  md ""
}

stage_build() {
  local log=$out/build.log
  [ -n "$prebuilt" ] && { stage_prebuilt; return; }
  md "## build"
  if ! command -v c++ >/dev/null && ! command -v g++ >/dev/null; then
    md "FAILED: no C++ compiler on this machine"; failures=$((failures + 1)); return 1
  fi
  limited "${limit[build]}" "$log" scripts/setup.sh
  md "$(verdict): scripts/setup.sh with SJD_DEPS_PREFIX in ${took} s ($SJD_JOBS jobs); log build.log"
  grep -h 'setup: Torch has CUDA' "$log" | sed 's/^setup: /- /' >> "$results"
  local arch; arch=$(sed -n 's/^SJD_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
  md "- CUDA sources: $([ -n "$arch" ] && echo "built (architectures $arch)" || echo "not built (CPU build)")"
  grep -h -E 'error:|FAILED:' "$log" | head -20 | sed 's/^/    /' >> "$results"
  cap_log "$log"
  # The binaries of this build, for a later call on a fresh machine (SJD_PREBUILT).
  if [ "$rc" -eq 0 ] && [ -f "$build/tests/tests_cuda" ] &&
     scripts/pack_prebuilt.sh "$build" "$work/build-prebuilt" >> "$log" 2>&1; then
    tar -czf "$out/prebuilt.tar.gz" -C "$work" build-prebuilt
    md "- sjd and tests_cuda of this build: prebuilt.tar.gz (unpack at the repository root, SJD_PREBUILT=build-prebuilt)"
  fi
  md ""
  return $rc
}

ensure_built() {
  if [ -n "$prebuilt" ]; then
    [ -f "$SJD_DEPS_PREFIX/.sjd-prebuilt-loads" ] && return 0
  elif [ -x "$build/sjd" ]; then
    return 0
  fi
  md "(nothing built or unpacked on this machine yet: the build stage first)"
  stage_deadline=$(( $(date +%s) + limit[build] ))
  stage_build
}

stage_test() {
  local log=$out/test.log
  md "## test"
  if [ "$tests_cuda_loads" -eq 0 ]; then
    md "- tests_cuda: not run (it does not load here: build stage); the switches stay as they are"
  elif [ -x "$build/tests/tests_cuda" ]; then
    # The allocator-accounting cases run in a process of their own: one of them breaks a capture on
    # purpose, and whatever PyTorch leaves behind must not reach the other cases.
    limited 70 "$log" "$build/tests/tests_cuda" --durations yes "~[graph-memory]"
    md "- tests_cuda: $(verdict) in ${took} s: $(grep -E '^(All tests passed|test cases:)' "$log" | tail -1)"
    if [ "$rc" -ne 0 ]; then
      # Code new to the device has a switch each: when its own tests fail, the later stages of
      # this call run without it, so the call still measures everything else. A rerun that never
      # started says nothing, and leaves its switch as it is (tests_cuda loads: the build stage said).
      local tag switch
      for tag in fused:SJD_FUSED_LAYER_OPS window-attention:SJD_WINDOW_ATTENTION \
          wide-attention:SJD_WIDE_WINDOW_ATTENTION columns:SJD_PIPELINE_COLUMNS graphs:SJD_CUDA_GRAPHS \
          sparse-tree:SJD_SPARSE_TREE_VERIFY; do
        switch=${tag#*:}; tag=${tag%%:*}
        limited 20 "$log" "$build/tests/tests_cuda" "[$tag]"
        if [ "$outcome" = no_time ]; then   # never ran
          md "- tests_cuda [$tag]: $(verdict): untested, $switch left as it was"
        elif [ "$rc" -ne 0 ]; then
          export "$switch=0"
          md "- tests_cuda [$tag]: $(verdict): the later stages run with $switch=0"
        fi
      done
    fi
    limited 20 "$log" "$build/tests/tests_cuda" --durations yes "[graph-memory]"
    md "- tests_cuda [graph-memory] (a process of its own): $(verdict) in ${took} s"
  elif [ "$device" = cuda ]; then
    md "- tests_cuda: NOT BUILT (is this Torch built with CUDA?)"
  else
    md "- tests_cuda: not built (CPU dry run)"
  fi
  cap_log "$log"
  md ""
}

# The whole CTest suite: the build's, or the one packed with the prebuilt binaries. It runs with
# whatever the test stage switched off, as the other stages do (results.md said which).
stage_suite() {
  local log=$out/test.log   # the returned files are already eight: this stage shares the test stage's log
  md "## suite (the whole CTest suite)"
  if [ -z "$prebuilt" ]; then
    run_ctest "$log" "$build" ""
  elif [ -f "$prebuilt/suite.tar.gz" ]; then
    unpack_suite "$log" && run_ctest "$log" "$suite" " (the suite built with the prebuilt binaries)"
  else
    md "- ctest: skipped ($prebuilt has no suite.tar.gz: scripts/cuda_build_check.sh build without SJD_TARGET, then pack)"
  fi
  cap_log "$log"
  md ""
}

# run_ctest LOG DIR WHAT: the CTest suite of build folder DIR, its verdict and failed tests in results.md.
run_ctest() {
  # The Python tests need pytest (and the packages scripts/setup.sh installs), which this
  # machine's Python may lack, and no network brings them: then they are left out, and said so.
  local python_tests=() packages="safetensors, pytest, numpy, transformers, tokenizers, tiktoken, sentencepiece"
  if ! "$PYTHON" -c "import $packages" 2>/dev/null; then  # the packages scripts/setup.sh checks for
    python_tests=(-E '^py\.')
    md "- the Python tests (py.*) left out: $PYTHON lacks one of $packages"
  fi
  # shellcheck disable=SC2086
  limited "${limit[suite]}" "$1" ctest --test-dir "$2" -j "$SJD_JOBS" --output-on-failure --timeout 240 \
    "${python_tests[@]}" ${SJD_CHECK_CTEST_ARGS:-}
  md "- ctest$3: $(verdict) in ${took} s: $(grep -E 'tests passed, [0-9]+ tests failed' "$1" | tail -1)"
  sed -n '/The following tests FAILED/,/^Errors while running/p' "$1" | grep -E '^\s+[0-9]+ - ' | head -40 |
    sed 's/^\s*/    /' >> "$results"
}

# The CTest suite built on the CPU machine with the prebuilt binaries (scripts/pack_prebuilt.sh),
# unpacked into $suite with their sjd; its CTest files named that machine's build folder,
# source tree and Python (suite.paths), and now name this one's.
unpack_suite() {
  local log=$1
  rm -rf "$suite" && mkdir -p "$suite"
  if ! tar -xzf "$prebuilt/suite.tar.gz" -C "$suite" >> "$log" 2>&1 || [ ! -f "$prebuilt/suite.paths" ]; then
    md "- ctest: FAILED to unpack $prebuilt/suite.tar.gz (and its suite.paths)"; failures=$((failures + 1)); return 1
  fi
  cp "$prebuilt/sjd" "$suite/sjd"
  local python_path; python_path=$(command -v "$PYTHON")
  # A literal replacement (the paths are not patterns), most specific first: a Python may lie inside the
  # source tree, and the build folder does.
  if ! SUITE_PATHS="$prebuilt/suite.paths" NEW_PYTHON="$python_path" NEW_BUILD="$suite" NEW_SOURCE="$(pwd)" \
       "$PYTHON" - "$suite" >> "$log" 2>&1 <<'PY'
import os, pathlib, sys
recorded = dict(line.split("=", 1) for line in pathlib.Path(os.environ["SUITE_PATHS"]).read_text().splitlines()
                if "=" in line)
new = {"python": os.environ["NEW_PYTHON"], "build_dir": os.environ["NEW_BUILD"], "source_dir": os.environ["NEW_SOURCE"]}
missing = [key for key in new if not recorded.get(key) or not new[key]]
if missing:
    sys.exit(f"unpack_suite: no path for {', '.join(missing)} (suite.paths, or this machine's)")
for cmake in pathlib.Path(sys.argv[1]).rglob("*.cmake"):
    text = cmake.read_text()
    for key in new:
        text = text.replace(recorded[key], new[key])
    cmake.write_text(text)
PY
  then
    md "- ctest: FAILED to point the suite's CTest files at this machine (test.log says why)"; failures=$((failures + 1))
    return 1
  fi
  echo "unpack_suite: $(find "$suite" -name 'tests_*' -type f -perm -u+x | wc -l) test programs in $suite" >> "$log"
}

# A few captions of the default model's scenes.
write_prompts() {
  cat > "$work/prompts.txt" <<'EOF'
a large blue circle on the left, on a yellow background
a small green ring at the top, on a white background
a red square in the middle, on a striped background
two small yellow triangles on the right, on a gradient background
EOF
}

# tokens_agree A.json B.json: how many token ids agree, and where they first differ.
tokens_agree() {
  "$PYTHON" - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
same = sum(x == y for x, y in zip(a, b))
first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
print(f"{same}/{max(len(a), len(b))} tokens equal" + ("" if first is None else f", first difference at {first}"))
PY
}

# Where a generate run verified its windows and where its time went (its --stats file).
stats_summary() {
  "$PYTHON" - "$1" <<'PY' 2>/dev/null
import json, sys
s = json.load(open(sys.argv[1]))
t = s.get("seconds", {})
print(f"verifier {s.get('verifier', '?')}; " +
      ", ".join(f"{k} {t[k]:.3f} s" for k in ("prefill", "forward", "pipeline", "verify") if k in t))
PY
}

# pixels_agree DIR_A DIR_B: how many PNGs of A have B's pixels (decoded image data; the
# text chunks name the batch size, so the files' bytes differ).
pixels_agree() {
  "$PYTHON" - "$1" "$2" <<'PY'
import json, pathlib, struct, sys, zlib
def pixels(path):
    data, at, image = path.read_bytes(), 8, b""
    while at < len(data):
        size, kind = struct.unpack(">I4s", data[at:at + 8])
        image += data[at + 8:at + 8 + size] if kind == b"IDAT" else b""
        at += 12 + size
    return zlib.decompress(image)
def steps(folder):  # file -> decode steps, from the batch's manifest (a rounding difference moves a few late steps)
    try:
        lines = (folder / "manifest.jsonl").read_text().splitlines()
    except OSError:
        return {}
    records = (json.loads(line) for line in lines if line.strip())
    return {r["file"]: r.get("steps") for r in records if "file" in r}
a, b = (pathlib.Path(p) for p in sys.argv[1:3])
names = sorted(p.name for p in a.glob("*.png"))
same = sum((b / n).exists() and pixels(a / n) == pixels(b / n) for n in names)
steps_a, steps_b = steps(a), steps(b)
same_steps = sum(steps_a.get(n) is not None and steps_a.get(n) == steps_b.get(n) for n in names)
print(f"{same} of {len(names)} images with the same pixels, {same_steps} with the same number of steps")
PY
}

# sjd_tokens NAME DEVICE DTYPE [VAR=VALUE...] [-- FLAGS...]: one sjd generation of the run stage's prompt
# (seed 3) with those variables and flags; its tokens in $work/NAME.tokens.json. Called from stage_run.
# A failed run leaves no tokens file.
sjd_tokens() {
  local name=$1 on=$2 dtype=$3; shift 3
  local vars=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  rm -f "$work/$name.tokens.json"
  limited 60 "$log" env ${vars[@]+"${vars[@]}"} "$build/sjd" generate --model "$model" -p "$prompt" --seed 3 \
    --method sjd --device "$on" --dtype "$dtype" "$@" -o "$work/$name.png" --tokens "$work/$name.tokens.json"
  [ "$rc" -eq 0 ] || rm -f "$work/$name.tokens.json"
}

# agree_row LABEL A B: a results row saying how many tokens of runs A and B agree, or that one
# of them has none (its failure is already counted).
agree_row() {
  local missing=""
  [ -f "$work/$2.tokens.json" ] || missing="$2"
  [ -f "$work/$3.tokens.json" ] || missing="${missing:+$missing and }$3"
  if [ -z "$missing" ]; then
    md "| \`$1\` | $(tokens_agree "$work/$2.tokens.json" "$work/$3.tokens.json") | - |"
  else
    md "| \`$1\` | no tokens from $missing (see run.log) | - |"
  fi
}

stage_run() {
  local log=$out/run.log model=models/default
  md "## run ($model, --device $device)"
  write_prompts
  local prompt; prompt=$(head -1 "$work/prompts.txt")
  md "| command | result | seconds |"
  md "|---|---|---|"
  row() { md "| \`$1\` | $(verdict)${2:+; $2} | $took |"; }
  local dtype method
  for dtype in bf16 f32; do
    for method in ar sjd sjd-pac; do
      local log_size; log_size=$(stat -c %s "$log" 2>/dev/null || echo 0)
      limited 60 "$log" "$build/sjd" generate --model "$model" -p "$prompt" --seed 3 --method "$method" \
        --device "$device" --dtype "$dtype" -o "$work/generate-$method-$dtype.png" \
        --tokens "$work/generate-$method-$dtype.tokens.json" --stats "$work/generate-$method-$dtype.stats.json"
      row "generate --method $method --dtype $dtype" \
        "$(tail -c +$((log_size + 1)) "$log" | grep -o 'step compression [0-9.]*' | tail -1); $(stats_summary "$work/generate-$method-$dtype.stats.json")"
    done
  done
  # The same f32 runs on the CPU: CUDA's matmuls round differently, so a difference
  # is a finding to explain, not a failure by itself.
  for method in ar sjd; do
    limited 60 "$log" "$build/sjd" generate --model "$model" -p "$prompt" --seed 3 --method "$method" \
      --device cpu --dtype f32 -o "$work/generate-$method-cpu.png" --tokens "$work/generate-$method-cpu.tokens.json"
    if [ "$rc" -eq 0 ] && [ -f "$work/generate-$method-f32.tokens.json" ]; then
      row "generate --method $method, f32 $device vs cpu" \
        "$(tokens_agree "$work/generate-$method-f32.tokens.json" "$work/generate-$method-cpu.tokens.json")"
    else
      row "generate --method $method --device cpu"
    fi
  done
  if [ "$device" = cuda ]; then
    # Which part of a CUDA-vs-CPU difference the kernels have: the device's f32 probabilities
    # verified by the CPU reference (SJD_VERIFY_ON_HOST=1) against the device verifier's tokens.
    sjd_tokens generate-sjd-f32-host cuda f32 SJD_VERIFY_ON_HOST=1
    agree_row "generate --method sjd, f32 cuda: device verifier vs cpu verifier" generate-sjd-f32 generate-sjd-f32-host
    # --window auto plans from the device's step-cost profile (the default bundle has cpu-f32's only),
    # so the auto runs above may differ by their plans alone: a fixed window compares the arithmetic.
    sjd_tokens generate-sjd-L16-cuda cuda f32 -- --window 16
    sjd_tokens generate-sjd-L16-cpu cpu f32 -- --window 16
    agree_row "generate --method sjd --window 16, f32 cuda vs cpu" generate-sjd-L16-cuda generate-sjd-L16-cpu
    # A switch the test stage already turned off would compare off with off: such a row says so.
    local graphs_dtype
    for graphs_dtype in f32 bf16; do
      if [ "${SJD_CUDA_GRAPHS:-1}" = 0 ]; then
        md "| \`generate --method sjd --dtype $graphs_dtype: CUDA graphs vs SJD_CUDA_GRAPHS=0\` | skipped: graphs are off in this call (test stage) | - |"
      else
        sjd_tokens "generate-sjd-$graphs_dtype-eager" cuda "$graphs_dtype" SJD_CUDA_GRAPHS=0
        agree_row "generate --method sjd --dtype $graphs_dtype: CUDA graphs vs SJD_CUDA_GRAPHS=0" \
          "generate-sjd-$graphs_dtype" "generate-sjd-$graphs_dtype-eager"
      fi
      # The fused layer kernels round where the ATen ops round but sum the norms in another order
      # (and without FMA): a difference is a finding to explain with tests_cuda's [fused] cases.
      if [ "${SJD_FUSED_LAYER_OPS:-1}" = 0 ]; then
        md "| \`generate --method sjd --dtype $graphs_dtype: fused layer kernels vs SJD_FUSED_LAYER_OPS=0\` | skipped: the fused kernels are off in this call (test stage) | - |"
      else
        sjd_tokens "generate-sjd-$graphs_dtype-aten" cuda "$graphs_dtype" SJD_FUSED_LAYER_OPS=0
        agree_row "generate --method sjd --dtype $graphs_dtype: fused layer kernels vs SJD_FUSED_LAYER_OPS=0" \
          "generate-sjd-$graphs_dtype" "generate-sjd-$graphs_dtype-aten"
      fi
      # The window attention sums in another order than PyTorch's kernels (P in float32 on CUDA cores, in the
      # 16-bit type on tensor cores).
      if [ "${SJD_WINDOW_ATTENTION:-1}" = 0 ]; then
        md "| \`generate --method sjd --dtype $graphs_dtype: window attention vs SJD_WINDOW_ATTENTION=0\` | skipped: the window attention is off in this call (test stage) | - |"
      else
        sjd_tokens "generate-sjd-$graphs_dtype-sdpa" cuda "$graphs_dtype" SJD_WINDOW_ATTENTION=0
        agree_row "generate --method sjd --dtype $graphs_dtype: window attention vs SJD_WINDOW_ATTENTION=0" \
          "generate-sjd-$graphs_dtype" "generate-sjd-$graphs_dtype-sdpa"
      fi
    done
  fi
  limited 120 "$log" "$build/sjd" batch --model "$model" --prompts "$work/prompts.txt" --out-dir "$work/batch" \
    --method sjd --device "$device" --dtype bf16
  local done_count; done_count=$(grep -c '"status": *"ok"' "$work/batch/manifest.jsonl" 2>/dev/null)
  row "batch (4 prompts) --method sjd --dtype bf16" "${done_count:-0} of 4 ok in the manifest"
  limited 60 "$log" "$build/sjd" batch --model "$model" --prompts "$work/prompts.txt" --out-dir "$work/batch" \
    --method sjd --device "$device" --dtype bf16
  row "batch again (resumes: nothing to redo)"
  # Every method on CUDA; a CPU dry run keeps to two, since it only checks this script.
  local methods=ar,sjd,scd-mc,scd-gs,sjd-pac seeds=2
  [ "$device" = cpu ] && methods=ar,sjd seeds=1
  for dtype in bf16 f32; do
    limited 120 "$log" "$build/sjd" compare --model "$model" -p "$prompt" --methods "$methods" \
      --seeds "$seeds" --device "$device" --dtype "$dtype" --out-dir "$work/compare-$dtype"
    row "compare $methods --seeds $seeds --dtype $dtype"
  done
  tar -czf "$out/run.tar.gz" -C "$work" --exclude='prompts.txt' --exclude='./bench-*' --exclude='./build-prebuilt' . \
    2>/dev/null
  md "- images, tokens, stats, manifest and compare.json: run.tar.gz; output: run.log"
  cap_log "$log"
  md ""
}

stage_bench() {
  local log=$out/bench.log presets=${SJD_BENCH_PRESETS:-"lumina-7b-768 emu3-8b-720 llamagen-xl-512"}
  [ "$device" = cpu ] && presets=${SJD_BENCH_PRESETS:-tiny}
  md "## bench (scripts/bench_gpu.sh, one preset at a time)"
  local count; count=$(wc -w <<< "$presets")
  local preset
  for preset in $presets; do
    # An even share of what is left, so one slow preset leaves time for the rest.
    local share=$(( $(seconds_left) / count )); count=$((count - 1))
    # bench_gpu.sh stops its own `sjd bench` a little before the share ends, so that a hang (a kernel
    # profiler's, say) still leaves its results.md with the figures written before it.
    limited "$share" "$log" env SJD_BENCH_PRESETS="$preset" SJD_BENCH_DEVICE="$device" \
      SJD_BENCH_SECONDS=$(( share > 20 ? share - 10 : share )) scripts/bench_gpu.sh "$work/bench-$preset"
    md "- $preset: $(verdict) in ${took} s"
    if [ -f "$work/bench-$preset/results.md" ]; then
      sed -n '/^| preset/,$p' "$work/bench-$preset/results.md" >> "$results"
    fi
  done
  tar -czf "$out/bench.tar.gz" -C "$work" $(cd "$work" && ls -d bench-* 2>/dev/null) 2>/dev/null
  # The kernel profiles' traces of the 7-8B presets may not fit a returned file (16 MiB): then
  # the archive goes without them (each preset's json keeps its profile's summary).
  if [ "$(stat -c %s "$out/bench.tar.gz" 2>/dev/null || echo 0)" -gt $((15 * 1024 * 1024)) ]; then
    tar -czf "$out/bench.tar.gz" -C "$work" --exclude='*.trace.json' $(cd "$work" && ls -d bench-* 2>/dev/null) 2>/dev/null
    md "- bench.tar.gz without the profiles' traces (over 15 MiB with them)"
  fi
  md "- every preset's json and text: bench.tar.gz; output: bench.log"
  cap_log "$log"
  md ""
}

stage_batch() {
  local log=$out/run.log   # the returned files are already eight: this stage shares the run stage's log
  md "## batch (batched decoding on models/default, --device $device)"
  # Fixed windows: every sequence's tokens are its batch-1 tokens, so the pixels should match in f32
  # (cuBLAS may still round a matmul of another row count otherwise; in bf16 the batch-1 run's own
  # rounding is the reference, as the issue allows). A rounding difference moves a few late steps, a
  # slot fault all of them: hence the steps too. B = 2 refills each slot while the other is mid-image.
  write_prompts
  local b dtype runs
  for dtype in f32 bf16; do
    runs=""
    for b in 1 2 4; do
      limited 40 "$log" "$build/sjd" batch --model models/default --prompts "$work/prompts.txt" \
        --out-dir "$work/batch-$dtype-b$b" --method scd-mc -L 8 --batch-size "$b" --device "$device" --dtype "$dtype"
      runs="$runs; B = $b $(verdict) in ${took} s"
    done
    md "- scd-mc -L 8, $dtype (4 prompts$runs): B = 2 against B = 1: $(pixels_agree "$work/batch-$dtype-b1" \
      "$work/batch-$dtype-b2"); B = 4 against B = 1: $(pixels_agree "$work/batch-$dtype-b1" "$work/batch-$dtype-b4")"
  done
  # The images and manifests come back (run.tar.gz, where no run stage of this call made one).
  if [ ! -f "$out/run.tar.gz" ] && compgen -G "$work/batch-*" > /dev/null; then
    (cd "$work" && tar -czf "$out/run.tar.gz" batch-*) 2>> "$log"
  fi
  # Images per second against B, the speculative methods first (the stage's time may end the
  # table), in the share of the stage left after the check above. The windows are planned from
  # the bundle's profile for this device, else the generic GPU one (results.md's calibrate).
  limited "$(seconds_left)" "$log" env SJD="$build/sjd" DEVICE="$device" DTYPE=bf16 THREADS=1 \
    BATCH_SIZES="1 2 4 8 16" METHODS="sjd-pac,scd-mc,ar" bash -c 'scripts/bench_batch.sh 16 1 > "$1"' _ \
    "$work/batch-table.txt"
  md "- scripts/bench_batch.sh 16 1 (B = 1, 2, 4, 8, 16: issue 16's grid; 16 captions: B = 16 is one wave, no refill):" \
     "$(verdict) in ${took} s"
  [ -s out/bench_batch/errors.log ] && { echo "bench_batch errors:"; cat out/bench_batch/errors.log; } >> "$log"
  if [ -s "$work/batch-table.txt" ]; then
    md '```'
    cat "$work/batch-table.txt" >> "$results"
    md '```'
  fi
  cap_log "$log"
  md ""
}

stage_calibrate() {
  local log=$out/run.log   # the returned files are already eight: this stage shares the run stage's log
  md "## calibrate (step-cost profiles of models/default, --device $device)"
  md "Each is bundle.json's \`step_cost\` entry for its key (\`sjd bench --calibrate --into-bundle\` writes it there):"
  local dtype
  for dtype in bf16 f32; do
    limited 60 "$log" "$build/sjd" bench --calibrate --model models/default --device "$device" --dtype "$dtype" \
      --out "$work/step_cost-$device-$dtype.json"
    md "- $device-$dtype: $(verdict) in ${took} s"
    if [ "$rc" -eq 0 ] && [ -s "$work/step_cost-$device-$dtype.json" ]; then
      md '```json'
      "$PYTHON" -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' \
        "$work/step_cost-$device-$dtype.json" >> "$results" 2>/dev/null || cat "$work/step_cost-$device-$dtype.json" >> "$results"
      md '```'
    fi
  done
  cap_log "$log"
  md ""
}

stage_fused() {
  local log=$out/bench.log preset=lumina-7b-768 setting
  [ "$device" = cpu ] && preset=tiny
  md "## fused (the layer's fused kernels, the window attention and the listed tree verification: sjd bench --preset $preset --dtype bf16, on and off)"
  md "| SJD_FUSED_LAYER_OPS, SJD_WINDOW_ATTENTION, SJD_WIDE_WINDOW_ATTENTION, SJD_SPARSE_TREE_VERIFY | AR ms | AR queued ms | L=64 ms | tree ms | forward share of AR | fused kernels | AR attention | L=64 attention | seconds |"
  md "|---|---|---|---|---|---|---|---|---|---|"
  # Rows of a kernel the test stage found wrong (its switch is 0) are left out; with the fused kernels off
  # the window attention is still timed on and off.
  local settings=() setting candidates=("1 1 1 1" "1 1 0 1" "1 0 0 1" "0 0 0 1")
  if [ "${SJD_FUSED_LAYER_OPS:-1}" = 0 ]; then
    md "| - | the fused kernels' rows are left out: tests_cuda's [fused] cases failed (test stage) | - | - | - | - | - | - | - | - |"
    candidates=("0 1 1 1" "0 1 0 1" "0 0 0 1")
  fi
  for setting in "${candidates[@]}"; do
    read -r fused window wide sparse <<< "$setting"
    [ "$window" = 1 ] && [ "${SJD_WINDOW_ATTENTION:-1}" = 0 ] && continue
    [ "$wide" = 1 ] && [ "${SJD_WIDE_WINDOW_ATTENTION:-1}" = 0 ] && continue
    # Without the listed tree verification (its tests failed) the other rows still run, with it off, once each.
    [ "${SJD_SPARSE_TREE_VERIFY:-1}" = 0 ] && setting="$fused $window $wide 0"
    [[ " ${settings[*]/%/,} " == *" $setting, "* ]] && continue
    settings+=("$setting")
  done
  # The listed tree verification against the whole vocabulary: the first row again with it off.
  if [ "${SJD_SPARSE_TREE_VERIFY:-1}" != 0 ] && [ "${#settings[@]}" -gt 0 ]; then
    settings=("${settings[0]}" "${settings[0]% *} 0" "${settings[@]:1}")
  fi
  for setting in "${settings[@]}"; do
    local fused window wide sparse json=$work/fused-${setting// /-}.json
    read -r fused window wide sparse <<< "$setting"
    limited 120 "$log" env SJD_FUSED_LAYER_OPS=$fused SJD_WINDOW_ATTENTION=$window SJD_WIDE_WINDOW_ATTENTION=$wide \
      SJD_SPARSE_TREE_VERIFY=$sparse "$build/sjd" bench --preset "$preset" --device "$device" --dtype bf16 \
      --windows 64 --batch-sizes 1 --no-vq --json "$json"
    if [ "$rc" -eq 0 ] && [ -s "$json" ]; then
      local table_row
      table_row=$("$PYTHON" - "$json" "$fused, $window, $wide, $sparse" "$took" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ar, tree = r["ar_step"], r["tree_step"]
wide = [w for w in r["window_steps"] if w["window"] == 64]
wide_ms = f"{wide[0]['total_ms']:.2f}" if wide else "-"
print(f"| {sys.argv[2]} | {ar['total_ms']:.2f} | {ar.get('queued_ms', 0):.2f} | {wide_ms} | {tree['total_ms']:.2f} | "
      f"{100 * ar['forward_ms'] / ar['total_ms']:.0f}% | {'on' if r.get('fused_layer_ops') else 'off'} | "
      f"{ar.get('attention', '-')} | {wide[0].get('attention', '-') if wide else '-'} | {sys.argv[3]} |")
PY
) || table_row="| $fused, $window, $wide, $sparse | ok, but its JSON is unreadable: $json | - | - | - | - | - | - | - |\
 $took |"
      md "$table_row"
    else
      md "| $fused, $window, $wide, $sparse | $(verdict) | - | - | - | - | - | - | - | $took |"
    fi
  done
  cap_log "$log"
  md ""
}

# compute-sanitizer over the kernels' own cases (not the transformer's: a sanitized forward is slow).
# memcheck: out-of-bounds and misaligned accesses anywhere in them; racecheck: shared-memory hazards,
# one kernel at a time, so a slow one cannot hide the others' verdicts.
stage_sanitize() {
  local log=$out/test.log sanitizer
  md "## sanitize (compute-sanitizer over tests_cuda's kernel cases)"
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ ! -x "$build/tests/tests_cuda" ] || [ "$tests_cuda_loads" -eq 0 ]; then
    md "- not run: no tests_cuda that loads here"; md ""; return
  elif [ -z "$sanitizer" ]; then
    md "- not run: no compute-sanitizer on this machine"; md ""; return
  fi
  local cases=("window attention gives softmax*" "window attention on tensor cores*" "tree levels over the ids listed*"
               "tree levels over the whole vocabulary*" "fused add + RMS norm*" "fused silu*" "fused qkv prologue*"
               "fused logits pipeline matches*" "spine MRS and tail drafts*" "bonus draws on the device*")
  local all; all=$(IFS=,; echo "${cases[*]}")
  limited 100 "$log" "$sanitizer" --tool memcheck --error-exitcode 1 "$build/tests/tests_cuda" "$all"
  md "- memcheck, all ${#cases[@]} cases: $(verdict) in ${took} s: $(grep -E '^========= ERROR SUMMARY' "$log" | tail -1)"
  local name
  for name in "${cases[@]:0:8}"; do
    limited 30 "$log" "$sanitizer" --tool racecheck --racecheck-report hazard --error-exitcode 1 \
      "$build/tests/tests_cuda" "$name"
    md "- racecheck \"$name\": $(verdict) in ${took} s: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$log" | tail -1)"
  done
  cap_log "$log"
  md ""
}

# --- main ----------------------------------------------------------------------
machine
for s in "${stages[@]}"; do
  stage_deadline=$(( $(date +%s) + limit[$s] ))
  if [ "$s" = build ]; then
    stage_build
  elif ensure_built; then
    stage_deadline=$(( $(date +%s) + limit[$s] ))
    "stage_$s"
  else
    md "## $s"; md "skipped: there is no build"; md ""; failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] || md "**$failures command(s) failed or ran out of time** (the exit code is 1)"
echo "device_check: wrote $results"
cat "$results"
[ "$failures" -eq 0 ]

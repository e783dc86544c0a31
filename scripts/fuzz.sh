#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, AddressSanitizer) into build-fuzz/
# and runs each for a fixed time from seed inputs made from the repository's own
# files. A crash, a leak of an unexpected exception, a hang (-timeout) or a huge
# allocation (-rss_limit_mb) fails the run; the reproducer is left in the log dir.
#   scripts/fuzz.sh                       every target, FUZZ_SECONDS each (default 30)
#   FUZZ_SECONDS=600 scripts/fuzz.sh safetensors manifest
# Needs clang and libclang-rt-14-dev (installed by scripts/setup.sh with SJD_FUZZ=1).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${SJD_FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-30}
jobs=${SJD_JOBS:-$(nproc)}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(safetensors bundle_json tokenizer_json prompt_file manifest png_reader)
python=${PYTHON:-python3}

if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DSJD_FUZZ=ON -DSJD_BUILD_TESTS=OFF -DSJD_ENABLE_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer" \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DPython3_EXECUTABLE="$(command -v "$python")"
fi
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]/#/fuzz_}"

seeds="$build_dir/seeds"
"$python" - "$seeds" <<'PY'
import json, os, struct, sys, zlib
root = sys.argv[1]
def put(target, name, data):
    os.makedirs(os.path.join(root, target), exist_ok=True)
    with open(os.path.join(root, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
# safetensors: a float, an integer and a bool tensor, with metadata
header = {"__metadata__": {"format": "pt"},
          "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
          "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]},
          "c": {"dtype": "BOOL", "shape": [3], "data_offsets": [40, 43]}}
h = json.dumps(header).encode()
put("safetensors", "small", struct.pack("<Q", len(h)) + h + struct.pack("<6f", *range(6)) + struct.pack("<2q", 7, -1) + b"\x00\x01\x01")
put("bundle_json", "default", open("models/default/bundle.json", "rb").read())
put("tokenizer_json", "default", open("models/default/tokenizer.json", "rb").read())
put("prompt_file", "txt", b"\x00a red apple\n\na blue square\r\n")
put("prompt_file", "tsv", b"\x01Prompt\tCategory\na red apple\tfood\n")
put("prompt_file", "csv", b"\x02id,Prompt\n1,\"a red, round apple\"\n2,a \"\"quoted\"\" pear\n")
put("prompt_file", "jsonl", b"\x03{\"prompt\": \"a red apple\"}\n{\"prompt\": \"\\u00e9t\\u00e9\"}\n")
record = {"index": 0, "prompt": "a red apple", "line": 1, "seed": 1, "file": "00000_a-red-apple.png", "model": "m",
          "status": "ok", "settings": {"seed": 1, "cfg": 2.0}, "file_bytes": 10, "file_crc32": 5}
put("manifest", "lines", json.dumps(record) + "\n" + json.dumps({"index": 1, "status": "failed", "error": "x"}) + "\n")
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
raw = b"".join(b"\x00" + bytes([x * 60, 0, 255 - x * 60] * 4) for x in range(4))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0)) +
       chunk(b"tEXt", b"prompt\x00a red apple") + chunk(b"iTXt", b"settings\x00\x00\x00\x00\x00{\"cfg\": 2}") +
       chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
put("png_reader", "small", png)
PY

status=0
for target in "${targets[@]}"; do
  corpus="$build_dir/corpus/$target"
  logs="$build_dir/logs/$target"
  mkdir -p "$corpus" "$logs"
  echo "fuzz: $target for ${seconds}s"
  # Leak checking is off: LibTorch's static initialisers allocate for the process's lifetime.
  if ASAN_OPTIONS=detect_leaks=0 "$build_dir/fuzz/fuzz_$target" "$corpus" "$seeds/$target" \
       -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
       -artifact_prefix="$logs/" >"$logs/fuzz.log" 2>&1; then
    tail -n 1 "$logs/fuzz.log" | sed "s/^/fuzz: $target: /"
    grep -E "^#[0-9]+ +DONE" "$logs/fuzz.log" | tail -n 1 | sed "s/^/fuzz: $target: /" || true
  else
    echo "fuzz: $target FAILED; see $logs/fuzz.log"
    tail -n 30 "$logs/fuzz.log"
    status=1
  fi
done
exit $status

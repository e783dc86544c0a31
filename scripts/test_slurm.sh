#!/bin/bash
# The Slurm path for real (scripts/test.sh runs it after the CTest tests; SJD_SLURM=0 skips it):
# installs Debian's slurm-wlm and munge, starts a one-node cluster (munged,
# slurmctld, slurmd from a generated slurm.conf), submits
# scripts/slurm/batch_array.sbatch as an array of 4 tasks on the default model,
# and checks that
#   1. the merged result equals an unsharded run, byte for byte (PNGs, and the
#      merged manifest apart from timings);
#   2. with one array task cancelled mid-run, re-submitting the same array makes
#      exactly what was missing: nothing lost, nothing made twice.
# Needs root (or sudo) for the packages and the daemons; stops its daemons on exit.
#   scripts/test_slurm.sh [BUILD_DIR]      (default: build)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
sjd="$build/sjd"
[[ -x "$sjd" ]] || { echo "test_slurm: $sjd not built (scripts/setup.sh)" >&2; exit 2; }
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge python3
fi

work=$(mktemp -d /tmp/sjd_slurm.XXXXXX)
chmod 755 "$work"
pids=()
# The daemons write their state as they shut down (slurmctld saves its job state on SIGTERM), so the work
# folder is removed only after they have exited; a leftover file must not turn a passed test into a failure.
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do as_root kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 100); do
    local alive=0
    for pid in "${pids[@]}"; do as_root kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive -eq 0 ]] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do as_root kill -9 "$pid" 2>/dev/null || true; done
  if [[ -z "${KEEP:-}" ]]; then
    as_root rm -rf "$work" 2>/dev/null || echo "test_slurm: could not remove $work (left for inspection)" >&2
  fi
  exit "$status"
}
trap cleanup EXIT
fail() { echo "test_slurm: FAIL: $*" >&2; exit 1; }

# --- munge: a fresh key and a daemon on a private socket
mkdir -p "$work/munge"
as_root dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
as_root chown -R munge: "$work/munge"
as_root chmod 700 "$work/munge"
as_root chmod 400 "$work/munge/munge.key"
as_root runuser -u munge -- munged --key-file="$work/munge/munge.key" --socket="$work/munge/socket" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" --seed-file="$work/munge/seed" --force
pids+=("$(cat "$work/munge/munged.pid")")

# --- slurm.conf: this machine as controller and only node (on 127.0.0.1: no name service needed), 4 CPUs,
# no cgroups (none in a container), private ports
host=$(hostname -s)
mkdir -p "$work/state" "$work/spool" "$work/logs"
cat >"$work/slurm.conf" <<CONF
ClusterName=sjdtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$work/munge/socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$work/slurm.conf"
as_root env SLURM_CONF="$SLURM_CONF" slurmctld
as_root env SLURM_CONF="$SLURM_CONF" slurmd
for _ in $(seq 100); do [[ -s "$work/slurmctld.pid" && -s "$work/slurmd.pid" ]] && break; sleep 0.2; done
pids+=("$(cat "$work/slurmctld.pid")" "$(cat "$work/slurmd.pid")")
for _ in $(seq 150); do
  sinfo -h -o %t 2>/dev/null | grep -qx idle && break
  sleep 0.2
done
sinfo -h -o %t | grep -qx idle || fail "the node did not come up: $(sinfo 2>&1; tail -5 "$work/slurmd.log")"
echo "test_slurm: cluster up ($(sinfo --version), node $host)"

# --- prompts and the unsharded reference
python3 - "$work/prompts.txt" <<'PY'
import sys
colours = ["red", "green", "blue", "yellow", "purple", "orange"]
shapes = ["circle", "square", "ring", "triangle"]
places = ["on the left", "on the right", "at the top", "at the bottom"]
with open(sys.argv[1], "w") as f:
    for i in range(40):
        f.write(f"a small {colours[i % 6]} {shapes[i % 4]} {places[(i // 4) % 4]}\n")
PY
OMP_NUM_THREADS=1 "$sjd" batch --model "$repo/models/default" --prompts "$work/prompts.txt" --out-dir "$work/ref" >/dev/null
"$sjd" manifest "$work/ref" --merge >/dev/null

submit() {  # submit OUT_DIR [sbatch flags...]: prints the job id
  local out=$1
  shift
  sbatch --parsable --array=0-3 --gres=none --cpus-per-task=1 --output="$work/logs/%A_%a.log" "$@" \
    --export=ALL,SJD="$sjd",SJD_DEVICE=cpu,OMP_NUM_THREADS=1 \
    "$repo/scripts/slurm/batch_array.sbatch" "$repo/models/default" "$work/prompts.txt" "$out"
}

# Same PNGs byte for byte, each image made once, and the merged manifest of the reference.
check_same_as_reference() {
  local out=$1
  "$sjd" manifest "$out" >"$work/status.txt" || fail "$out incomplete: $(cat "$work/status.txt")"
  python3 - "$work/ref" "$out" <<'PY' || fail "$out differs from the unsharded run"
import collections, json, pathlib, sys
ref, out = map(pathlib.Path, sys.argv[1:])
made = collections.Counter()
for manifest in out.glob("manifest*.jsonl"):
    for line in manifest.read_text().splitlines():
        record = json.loads(line)
        if record["status"] == "ok":
            made[record["index"]] += 1
twice = sorted(i for i, n in made.items() if n > 1)
assert not twice, f"made more than once: {twice}"
pngs = lambda d: {p.name: p.read_bytes() for p in d.glob("*.png")}
assert pngs(ref) == pngs(out), "PNG files differ"
print(f"test_slurm: {len(made)} images, each made once, PNGs identical to the unsharded run")
PY
  "$sjd" manifest "$out" --merge >/dev/null
  python3 - "$work/ref/manifest.jsonl" "$out/manifest.jsonl" <<'PY' || fail "merged manifests differ"
import json, sys
def records(path):
    rows = [json.loads(line) for line in open(path)]
    for row in rows:
        row.pop("seconds", None)  # failed records have no timings
        row.pop("seconds_by_stage", None)
    return rows
assert records(sys.argv[1]) == records(sys.argv[2])
print("test_slurm: merged manifest equals the unsharded run's (timings aside)")
PY
}

# --- 1. a whole array
sbatch_out=$(submit "$work/out" --wait) || fail "array job failed: $(cat "$work"/logs/*.log)"
grep -h "shard" "$work"/logs/*.log | sort
check_same_as_reference "$work/out"

# --- 2. one task cancelled mid-run, the same array submitted again
rm -f "$work"/logs/*.log
job=$(submit "$work/killed")
manifest="$work/killed/manifest.1-of-4.jsonl"
for _ in $(seq 600); do [[ -s "$manifest" ]] && break; sleep 0.1; done
[[ -s "$manifest" ]] || fail "task 1 made nothing: $(cat "$work"/logs/*.log)"
scancel "${job}_1"
while squeue -h -j "$job" 2>/dev/null | grep -q .; do sleep 0.5; done
made_before=$(wc -l <"$manifest")
echo "test_slurm: task 1 cancelled after $made_before of its 10 images"
if "$sjd" manifest "$work/killed" >"$work/status.txt"; then
  fail "the cancelled task had already finished; nothing to resume"
fi
grep "^missing" "$work/status.txt"
rm -f "$work"/logs/*.log
submit "$work/killed" --wait >/dev/null || fail "re-submitted array failed: $(cat "$work"/logs/*.log)"
grep -h "generated" "$work"/logs/*.log
check_same_as_reference "$work/killed"
echo "test_slurm: PASS"

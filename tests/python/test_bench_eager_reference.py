"""scripts/bench_eager_reference.py against `sjd bench`.

The eager reference must time transformers' Chameleon with the very weights
`sjd bench` made (same hashed values, same dtype conversion), so both print the
same weights checksum; and it must report an AR step and every window step.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("SJD_BUILD_DIR", ROOT / "build"))


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_eager_reference_has_the_weights_of_sjd_bench(tmp_path, dtype):
    sjd = BUILD / "sjd"
    assert sjd.exists(), f"{sjd} not built (set SJD_BUILD_DIR)"
    common = ["--preset", "tiny", "--device", "cpu", "--dtype", dtype, "--iterations", "1", "--warmup", "0",
              "--windows", "4,16"]
    subprocess.run([str(sjd), "bench", *common, "--no-vq", "--json", str(tmp_path / "sjd.json")], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_eager_reference.py"), *common,
                    "--json", str(tmp_path / "eager.json")], check=True, capture_output=True)
    ours = json.loads((tmp_path / "sjd.json").read_text())
    eager = json.loads((tmp_path / "eager.json").read_text())
    assert eager["weights_checksum"] == pytest.approx(ours["weights_checksum"], rel=1e-12, abs=1e-12)
    assert eager["ar_step_ms"] > 0
    assert sorted(eager["window_step_ms"]) == ["16", "4"]
    assert all(ms > 0 for ms in eager["window_step_ms"].values())


def test_step_vs_eager_times_both_sides_on_the_bundle(tmp_path):
    """scripts/bench_step_vs_eager.py loads the bundle's own HF weights into the eager reference and
    times the same window sizes on both sides (figures are printed, not asserted)."""
    sjd = BUILD / "sjd"
    assert sjd.exists(), f"{sjd} not built (set SJD_BUILD_DIR)"
    out = tmp_path / "side_by_side.json"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_step_vs_eager.py"), "--sjd", str(sjd),
                    "--iterations", "1", "--json", str(out)], check=True, capture_output=True)
    figures = json.loads(out.read_text())
    assert sorted(figures["sjd_ms"]) == sorted(figures["eager_ms"])
    assert "1" in figures["sjd_ms"] and "16" in figures["sjd_ms"]
    assert all(ms > 0 for ms in list(figures["sjd_ms"].values()) + list(figures["eager_ms"].values()))


def test_bench_gpu_script_runs_every_python_step_with_PYTHON(tmp_path):
    """scripts/bench_gpu.sh as the device machine runs it, on the CPU with the tiny preset: every Python it starts
    (torch's version, the eager reference, the table) is $PYTHON, the one whose torch device_check.sh checked."""
    sjd = BUILD / "sjd"
    assert sjd.exists(), f"{sjd} not built (set SJD_BUILD_DIR)"
    calls = tmp_path / "calls.txt"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho "$1" >> {calls}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    out = tmp_path / "bench"
    env = dict(os.environ, SJD_BUILD_DIR=str(BUILD), SJD_BENCH_DEVICE="cpu", SJD_BENCH_PRESETS="tiny",
               PYTHON=str(python), PATH="/usr/bin:/bin")  # no python3 of the test's own venv on PATH
    run = subprocess.run(["bash", str(ROOT / "scripts" / "bench_gpu.sh"), str(out)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert calls.read_text().split("\n")[:3] == ["-c", "scripts/bench_eager_reference.py", "scripts/bench_gpu_results.py"]
    results = (out / "results.md").read_text()
    assert re.search(r"^torch: \S+", (out / "machine.txt").read_text(), re.M)
    assert re.search(r"^\| tiny \| AR \| [0-9.]+ \| [0-9.]+ \|", results, re.M), results
    # sjd bench --profile: a Kineto trace per profiled step kind next to the figures
    assert sorted(p.name for p in (out / "profile").iterdir()) == [
        "tiny-L64.trace.json", "tiny-ar.trace.json", "tiny-tree.trace.json"]


# A stand-in's line that copies FILE to the path after --json.
COPY_TO_JSON = 'while [ $# -gt 0 ]; do [ "$1" = --json ] && cp {} "$2"; shift; done\n'


def tiny_figures(tmp_path):
    """The real `sjd bench` figures of the tiny preset, made before any timed script."""
    real = BUILD / "sjd"
    assert real.exists(), f"{real} not built (set SJD_BUILD_DIR)"
    figures = tmp_path / "figures.json"
    subprocess.run([str(real), "bench", "--preset", "tiny", "--device", "cpu", "--dtype", "bf16", "--json",
                    str(figures)], check=True, capture_output=True, timeout=120)
    return figures


def bench_gpu_with_stand_ins(tmp_path, sjd_body, eager_body, seconds):
    """scripts/bench_gpu.sh on the tiny preset with `sjd` and the eager reference replaced by bash bodies
    (the rest of $PYTHON is the real one): returns the finished process and the output folder."""
    fake_build = tmp_path / "build"
    fake_build.mkdir()
    (fake_build / "sjd").write_text("#!/bin/bash\n" + sjd_body)
    python = tmp_path / "python"
    python.write_text("#!/bin/bash\nif [ \"$1\" = scripts/bench_eager_reference.py ]; then\n" + eager_body +
                      f'fi\nexec {sys.executable} "$@"\n')
    for program in (fake_build / "sjd", python):
        program.chmod(0o755)
    out = tmp_path / "bench"
    env = dict(os.environ, SJD_BUILD_DIR=str(fake_build), SJD_BENCH_DEVICE="cpu", SJD_BENCH_PRESETS="tiny",
               PYTHON=str(python), SJD_BENCH_SECONDS=str(seconds))
    run = subprocess.run(["bash", str(ROOT / "scripts" / "bench_gpu.sh"), str(out)], env=env, capture_output=True,
                         text=True, timeout=seconds + 60)
    return run, out


def test_bench_gpu_script_writes_results_when_sjd_bench_hangs_after_its_figures(tmp_path):
    """A `sjd bench` that hangs once its JSON is written (in the kernel profiles, say) is stopped within
    SJD_BENCH_SECONDS, and results.md still holds its figures beside the eager reference's; the exit says it failed."""
    figures = tiny_figures(tmp_path)
    eager = tmp_path / "eager.json"
    eager.write_text(json.dumps({"weights_checksum": json.loads(figures.read_text())["weights_checksum"],
                                 "ar_step_ms": 2.5, "window_step_ms": {"16": 3.0}}))
    run, out = bench_gpu_with_stand_ins(tmp_path, COPY_TO_JSON.format(figures) + "exec sleep 600\n",
                                        COPY_TO_JSON.format(eager) + "exit 0\n", seconds=20)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "bench_gpu: sjd bench exited 124" in (out / "tiny.sjd.txt").read_text()
    results = (out / "results.md").read_text()
    assert re.search(r"^\| tiny \| AR \| [0-9.]+ \| [0-9.]+ \| 2\.50 \|", results, re.M), results
    assert "same weights as eager: True" in results


def test_bench_gpu_script_stops_a_hung_eager_reference_at_half_its_time(tmp_path):
    """An eager reference that hangs is stopped at half of SJD_BENCH_SECONDS, and sjd bench still runs and
    fills results.md (the eager columns empty); the exit says something failed."""
    run, out = bench_gpu_with_stand_ins(tmp_path, COPY_TO_JSON.format(tiny_figures(tmp_path)) + "exit 0\n",
                                        "exec sleep 600\n", seconds=30)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "bench_gpu: the eager reference exited 124" in (out / "tiny.eager.txt").read_text()
    results = (out / "results.md").read_text()
    assert re.search(r"^\| tiny \| AR \| [0-9.]+ \| [0-9.]+ \| - \|", results, re.M), results

"""scripts/step_cost_into_bundle.py: a device check's calibrated profiles into a bundle.

A results.md written as device_check.sh's calibrate stage writes it (two runs appended, one failed line)
goes into a copy of the default bundle; `sjd inspect` must then read the new profile as a generation does.
Broken inputs must exit 2 naming the file and the profile, and leave bundle.json as it was.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "step_cost_into_bundle.py"
BUILD = pathlib.Path(os.environ.get("SJD_BUILD_DIR", ROOT / "build"))
DEFAULT = ROOT / "models" / "default"


def profile(name, ms=1.0):
    return {"name": name, "curves": [{"rows": 2, "points": [[1, ms], [16, ms * 1.2], [64, ms * 1.6]]},
                                     {"rows": 32, "points": [[1, ms * 2], [16, ms * 5]]}]}


def calibrate_section(lines):
    text = ["## calibrate (step-cost profiles of models/default, --device cuda)",
            "Each is bundle.json's `step_cost` entry for its key (`sjd bench --calibrate --into-bundle` writes it there):"]
    for key, outcome, body in lines:
        text.append(f"- {key}: {outcome}")
        if body is not None:
            text += ["```json", body, "```"]
    return "\n".join(text) + "\n\n"


def results_md(tmp_path, *sections):
    path = tmp_path / "results.md"
    path.write_text("".join(f"# device_check (run {i})\n\n" + s for i, s in enumerate(sections)))
    return path


def bundle_copy(tmp_path, without=()):
    """The default bundle with its weights linked and its bundle.json copied (the one file rewritten), less the
    step-cost profiles named in `without`."""
    folder = tmp_path / "bundle"
    folder.mkdir()
    for f in DEFAULT.iterdir():
        if f.name == "bundle.json":
            shutil.copy(f, folder / f.name)
        else:
            (folder / f.name).symlink_to(f)
    if without:
        bundle = json.loads((folder / "bundle.json").read_text())
        for key in without:
            bundle["step_cost"].pop(key, None)
        (folder / "bundle.json").write_text(json.dumps(bundle, indent=2) + "\n")
    return folder


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_the_last_finished_run_of_each_profile_goes_into_the_bundle(tmp_path):
    results = results_md(
        tmp_path,
        calibrate_section([("cuda-bf16", "ok in 40 s", json.dumps(profile("first H100 run"))),
                           ("cuda-f32", "TIMED OUT in 60 s", None)]),
        calibrate_section([("cuda-bf16", "ok in 41 s", json.dumps(profile("second H100 run", 9.0))),
                           ("cuda-f32", "ok in 52 s", json.dumps(profile("f32 on the H100", 20.0)))]))
    bundle = bundle_copy(tmp_path)
    before = json.loads((DEFAULT / "bundle.json").read_text())

    r = run(results, bundle)
    assert r.returncode == 0, r.stderr
    after = json.loads((bundle / "bundle.json").read_text())
    assert after["step_cost"]["cuda-bf16"] == profile("second H100 run", 9.0)
    assert after["step_cost"]["cuda-f32"] == profile("f32 on the H100", 20.0)
    assert after["step_cost"]["cpu-f32"] == before["step_cost"]["cpu-f32"]
    assert {k: v for k, v in after.items() if k != "step_cost"} == {k: v for k, v in before.items() if k != "step_cost"}

    sjd = BUILD / "sjd"
    if not sjd.exists():
        pytest.skip(f"{sjd} not built (set SJD_BUILD_DIR)")
    shown = subprocess.run([str(sjd), "inspect", "--model", str(bundle)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "cuda-bf16 profile: 2-32 rows, 1-64 tokens per row (second H100 run)" in shown.stdout
    assert "cuda-f32 profile" in shown.stdout and "cpu-f32 profile" in shown.stdout


def test_storing_the_profile_a_bundle_has_leaves_its_bytes(tmp_path):
    """bundle.json is rewritten in its own key order and number format, so a commit shows only the profiles."""
    existing = json.loads((DEFAULT / "bundle.json").read_text())["step_cost"]["cpu-f32"]
    results = results_md(tmp_path, calibrate_section([("cpu-f32", "ok in 30 s", json.dumps(existing))]))
    bundle = bundle_copy(tmp_path)
    r = run(results, bundle)
    assert r.returncode == 0, r.stderr
    assert (bundle / "bundle.json").read_bytes() == (DEFAULT / "bundle.json").read_bytes()


def test_keys_picks_profiles_and_names_a_missing_one(tmp_path):
    results = results_md(tmp_path, calibrate_section([("cuda-bf16", "ok in 40 s", json.dumps(profile("bf16"))),
                                                      ("cuda-f32", "FAILED (exit 1) in 3 s", None)]))
    bundle = bundle_copy(tmp_path, without=("cuda-bf16", "cuda-f32"))  # the default bundle has both since 2026-11-29
    r = run(results, bundle, "--keys", "cuda-bf16")
    assert r.returncode == 0, r.stderr
    assert "cuda-f32" not in json.loads((bundle / "bundle.json").read_text())["step_cost"]
    r = run(results, bundle, "--keys", "cuda-bf16,cuda-f32")
    assert r.returncode == 2 and "no finished profile for cuda-f32" in r.stderr


@pytest.mark.parametrize("body, message", [
    ("{\"name\": \"x\", \"curves\": [", "cuda-bf16: invalid JSON"),
    (json.dumps({"name": "x", "curves": [{"rows": 0, "points": [[1, 1.0]]}]}), "cuda-bf16/curves/0/rows"),
    (json.dumps({"name": "x", "curves": [{"rows": 2, "points": [[1, "fast"]]}]}), "each point is [tokens, ms]"),
    (json.dumps({"curves": []}), "expected an object with a \"name\""),
])
def test_a_malformed_profile_is_refused_and_the_bundle_kept(tmp_path, body, message):
    results = results_md(tmp_path, calibrate_section([("cuda-bf16", "ok in 40 s", body)]))
    bundle = bundle_copy(tmp_path)
    before = (bundle / "bundle.json").read_bytes()
    r = run(results, bundle)
    assert r.returncode == 2
    assert str(results) in r.stderr and message in r.stderr
    assert "Traceback" not in r.stderr
    assert (bundle / "bundle.json").read_bytes() == before


def test_results_without_a_finished_profile_and_a_broken_bundle_exit_2(tmp_path):
    results = results_md(tmp_path, calibrate_section([("cuda-bf16", "TIMED OUT in 60 s", None)]))
    r = run(results, bundle_copy(tmp_path))
    assert r.returncode == 2 and "no step-cost profile finished" in r.stderr

    results = results_md(tmp_path, calibrate_section([("cuda-bf16", "ok in 40 s", json.dumps(profile("p")))]))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bundle.json").write_text("{\"step_cost\": [1, 2]}\n")
    r = run(results, broken)
    assert r.returncode == 2 and "/step_cost: expected an object" in r.stderr
    r = run(results, tmp_path / "nowhere")
    assert r.returncode == 2 and "bundle.json" in r.stderr and "Traceback" not in r.stderr

"""scripts/window_prior.py: a bundle's measured acceptance prior for automatic windows.

Against the shipped default model: the rates it prints are the manifests' drafts_by_age summed into ages
0, 1 and 2+ (recomputed here from an sjd batch run of the same prompts), `--write` stores exactly those in
bundle.json and nothing else there changes; too few drafts and missing files are refused with exit code 2.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SJD = pathlib.Path(os.environ.get("SJD_BUILD_DIR", ROOT / "build")) / "sjd"
SCRIPT = ROOT / "scripts/window_prior.py"
sys.path.insert(0, str(ROOT / "scripts"))

import scenes  # noqa: E402
import window_prior  # noqa: E402


def prompts_file(tmp_path, count=4):
    path = tmp_path / "prompts.jsonl"
    with open(path, "w") as f:
        for i in range(count):
            f.write(json.dumps({"prompt": scenes.scene(40000 + i, "train", 0)["caption"]}) + "\n")
    return path


def run_script(*args):
    return subprocess.run([sys.executable, str(SCRIPT), "--sjd", str(SJD), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_the_rates_are_the_manifests_drafts_summed_by_age_and_write_stores_only_them(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(ROOT / "models/default", model)
    before = json.loads((model / "bundle.json").read_text())
    before.pop("window_prior", None)
    (model / "bundle.json").write_text(json.dumps(before))
    (model / "bundle.json").chmod(0o644)
    mode = (model / "bundle.json").stat().st_mode & 0o777
    prompts = prompts_file(tmp_path)
    r = run_script("--model", model, "--prompts", prompts, "--inits", "repeat-up", "--min-tested", 10, "--write")
    assert r.returncode == 0, r.stderr

    # The same run by hand: sjd batch with the fixed window, the manifest's drafts summed into 0, 1, 2+.
    out = tmp_path / "by_hand"
    subprocess.run([str(SJD), "batch", "--model", str(model), "--prompts", str(prompts), "--out-dir", str(out),
                    "--method", "sjd", "-L", "8", "--init", "repeat-up", "--quiet"], check=True,
                   capture_output=True, timeout=300)
    tested, accepted = [0, 0, 0], [0, 0, 0]
    for line in (out / "manifest.jsonl").read_text().splitlines():
        for entry in json.loads(line)["drafts_by_age"]:
            age = min(int(entry["age"].rstrip("+")), 2)
            tested[age] += entry["tested"]
            accepted[age] += entry["accepted"]
    expected = [round(a / t, 3) for a, t in zip(accepted, tested)]
    assert all(t > 0 for t in tested)
    assert 0 < expected[1] < 1  # real outcomes, not all or nothing

    after = json.loads((model / "bundle.json").read_text())
    assert after["window_prior"] == {"repeat-up": expected}
    assert f"ages 0 / 1 / 2+ accepted {' / '.join(f'{x:.3f}' for x in expected)}" in r.stdout
    after.pop("window_prior")
    assert after == before  # nothing else in the bundle moved
    assert (model / "bundle.json").stat().st_mode & 0o777 == mode  # nor who may read it


def test_too_few_drafts_and_missing_files_exit_2_and_leave_the_bundle_alone(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(ROOT / "models/default", model)
    original = (model / "bundle.json").read_text()
    prompts = prompts_file(tmp_path, count=1)
    r = run_script("--model", model, "--prompts", prompts, "--inits", "random", "--min-tested", 100000, "--write")
    assert r.returncode == 2
    assert "init random: only" in r.stderr and "fewer than --min-tested 100000" in r.stderr
    assert (model / "bundle.json").read_text() == original
    r = run_script("--model", model, "--prompts", tmp_path / "absent.jsonl")
    assert r.returncode == 2 and "absent.jsonl: no such prompt file" in r.stderr
    r = run_script("--model", tmp_path / "nowhere", "--prompts", prompts)
    assert r.returncode == 2 and "bundle.json: no such bundle" in r.stderr
    r = run_script("--model", model, "--prompts", prompts, "--min-tested", 0)
    assert r.returncode == 2 and "--min-tested 0: must be at least 1" in r.stderr


def test_stored_rates_round_to_three_places_and_stop_at_what_sjd_takes():
    assert window_prior.stored_rates([3, 1000, 7], [2, 999, 7]) == [0.667, 0.99, 0.99]
    assert window_prior.stored_rates([10, 10, 10], [0, 5, 9]) == [0.0, 0.5, 0.9]
    assert window_prior.age_bin("0") == 0 and window_prior.age_bin("1") == 1
    assert window_prior.age_bin("2") == 2 and window_prior.age_bin("11+") == 2

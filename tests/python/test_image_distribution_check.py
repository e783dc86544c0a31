"""scripts/image_distribution_check.py: its two-sample test, its regions, and a small run on the default model.

The test statistic must accept two samples of one distribution and reject a small shift (fixed seeds; the
significance levels are stated at each assertion); the end-to-end run checks that a grossly different control
is rejected and that ar's own samples under two seed ranges are not told apart.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import image_distribution_check as check  # noqa: E402
import scenes  # noqa: E402

CAPTION = "a large red square in the centre, on a blue background"


def test_two_samples_of_one_distribution_pass_and_a_small_shift_is_rejected():
    rng = np.random.default_rng(7)
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    shifted = np.array([0.45, 0.35, 0.15, 0.05])
    same = [check.two_sample_p(rng.multinomial(5000, probs), rng.multinomial(5000, probs)) for _ in range(20)]
    # Under the null each p is uniform: all 20 above 1e-3 fails with probability < 2%.
    assert min(same) > 1e-3
    # A 5-point move of the top category at 5000 per side is about 5 standard errors.
    assert check.two_sample_p(rng.multinomial(5000, probs), rng.multinomial(5000, shifted)) < 1e-4


def test_rare_colours_are_pooled_so_a_few_stray_samples_are_no_evidence():
    # Unpooled, the two stray colours alone give chi-square 10 on 3 degrees of freedom (p ~ 0.02).
    a = np.array([500, 500, 5, 0])
    b = np.array([500, 500, 0, 5])
    assert check.two_sample_p(a, b) > 0.5
    assert check.two_sample_p(np.array([10, 0]), np.array([10, 0])) == 1.0  # one category: nothing to test


def test_regions_take_the_colour_most_of_their_pixels_have():
    scene = scenes.parse_caption(CAPTION)
    colours = check.region_colours(scenes.render(scene, 128), 8)
    assert colours.shape == (8, 8)
    assert scenes.COLOURS[colours[0, 0]] == "blue"
    assert scenes.COLOURS[colours[3, 3]] == "red" and scenes.COLOURS[colours[4, 4]] == "red"
    with pytest.raises(ValueError, match="does not divide"):
        check.region_colours(scenes.render(scene, 128), 7)


@pytest.mark.parametrize("entry, expected", [
    ("ar", ("ar", "", [])),
    ("sjd-pac+lantern", ("sjd-pac", "lantern", [])),
    ("ar@temperature=0.9@top-k=64", ("ar", "", ["--temperature", "0.9", "--top-k", "64"])),
])
def test_entries_name_a_method_a_relaxation_and_flags(entry, expected):
    assert check.parse_entry(entry) == expected


def test_a_bad_entry_is_refused_with_exit_code_2_and_named(capsys):
    assert check.main(["--caption", CAPTION, "--control", "ar@temperature"]) == 2
    assert "ar@temperature: 'temperature' is not flag=value" in capsys.readouterr().err
    assert check.main(["--caption", CAPTION, "--methods", "sjd@", "--control", ""]) == 2  # an empty flag
    assert check.main(["--caption", "a red square somewhere"]) == 2


def sjd_binary():
    build = os.environ.get("SJD_BUILD_DIR")
    if not build:
        pytest.skip("SJD_BUILD_DIR is not set (CTest sets it)")
    binary = pathlib.Path(build) / "sjd"
    if not binary.exists():
        pytest.fail(f"{binary} not found: build the sjd target first")
    return binary


def test_a_small_run_rejects_a_gross_control_and_not_ar_against_itself(tmp_path):
    # "ar" against "ar" under other seeds must pass (alpha 1e-3 over 16 regions); temperature 3 draws
    # noise, which 16 images per side tell apart from the model's blue-and-red squares.
    out = tmp_path / "check"
    r = subprocess.run([sys.executable, str(ROOT / "scripts/image_distribution_check.py"), "--caption", CAPTION,
                        "--images", "16", "--cells", "4", "--methods", "ar", "--control", "ar@temperature=3",
                        "--sjd", str(sjd_binary()), "--out-dir", str(out), "--", "--batch-size", "4"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr  # 1 if "ar" differed from itself or the control passed
    results = json.loads((out / "results.json").read_text())
    assert results["methods"]["ar@temperature=3"]["differs"], r.stdout
    assert not results["methods"]["ar#1"]["differs"], r.stdout
    assert "DIFFERS" in r.stdout and "consistent" in r.stdout

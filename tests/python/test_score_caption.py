"""scripts/score_caption.py: captions read back into scenes, and the scorer on images of them.

Every caption scenes.py writes must read back as the scene it came from (objects in caption
order, background kind and colours), the generator's own image of it must pass, and a caption
outside the language must be refused with what could not be read.
"""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import eval_default_model  # noqa: E402
import scenes  # noqa: E402
import score_caption  # noqa: E402


def test_every_caption_reads_back_as_its_scene():
    for split in ("train", "eval"):
        for i in range(200):
            s = scenes.scene(0, split, i)
            read = score_caption.scene_of(s["caption"])
            assert read["background"] == s["background"], s["caption"]
            assert read["objects"] == s["objects"], s["caption"]


def test_a_caption_outside_the_language_is_refused():
    with pytest.raises(ValueError, match="no object phrase"):
        score_caption.scene_of("a red apple")
    with pytest.raises(ValueError, match="no background phrase"):
        score_caption.scene_of("a large red square on the left")


def test_the_generators_own_image_passes_and_another_scene_fails(tmp_path):
    s = scenes.scene(0, "train", 3)
    good, bad = tmp_path / "good.png", tmp_path / "bad.png"
    eval_default_model.write_png(str(good), scenes.render(s))
    other = next(o for o in (scenes.scene(0, "train", i) for i in range(4, 100))
                 if o["background"]["colours"][0] != s["background"]["colours"][0])
    eval_default_model.write_png(str(bad), scenes.render(other))
    out = subprocess.run([sys.executable, str(ROOT / "scripts/score_caption.py"), "--caption", s["caption"],
                          str(good), str(bad)], check=True, capture_output=True, text=True).stdout
    assert f"{good}: objects {len(s['objects'])}/{len(s['objects'])}, background yes, scene yes" in out
    assert f"{bad}:" in out and "scene no" in out.split(f"{bad}:")[1]
    assert "scenes 1/2" in out

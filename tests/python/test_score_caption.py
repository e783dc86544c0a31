"""scripts/score_caption.py: captions read back into scenes, and the scorer on images of them.

The captions are read by scenes.parse_caption (tests/python/test_scenes.py checks it reads every
generated caption back as its scene); here: the generator's own image of a caption must pass, another
scene's must fail, and a caption outside the grammar must be refused with exit code 2 and the reason.
"""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import eval_default_model  # noqa: E402
import scenes  # noqa: E402


def test_a_caption_outside_the_grammar_is_refused_with_exit_code_2(tmp_path):
    image = tmp_path / "a.png"
    eval_default_model.write_png(str(image), scenes.render(scenes.scene(0, "train", 3)))
    r = subprocess.run([sys.executable, str(ROOT / "scripts/score_caption.py"), "--caption",
                        "a large red square on the left", str(image)], capture_output=True, text=True)
    assert r.returncode == 2
    assert "not a scene caption" in r.stderr and "a large red square on the left" in r.stderr


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
    # A miss says what was drawn instead: here the first object in another colour.
    o = s["objects"][0]
    colour = next(c for c in scenes.COLOURS if c not in (o["colour"], *s["background"]["colours"]))
    recoloured = tmp_path / "recoloured.png"
    eval_default_model.write_png(str(recoloured), scenes.render({**s, "objects": [{**o, "colour": colour},
                                                                                   *s["objects"][1:]]}))
    out = subprocess.run([sys.executable, str(ROOT / "scripts/score_caption.py"), "--caption", s["caption"],
                          str(recoloured)], check=True, capture_output=True, text=True).stdout
    assert f"; {o['size']} {o['colour']} {o['shape']} ({o['position']}) drawn as {colour}\n" in out


def test_a_missing_image_or_one_that_is_not_a_png_is_one_line_with_exit_code_2(tmp_path):
    # Both were tracebacks (FileNotFoundError, ValueError) with exit code 1.
    caption = scenes.scene(0, "train", 3)["caption"]
    not_png = tmp_path / "notes.png"
    not_png.write_text("not an image")
    for path, reason in ((tmp_path / "absent.png", "No such file or directory"), (not_png, "not a PNG file")):
        r = subprocess.run([sys.executable, str(ROOT / "scripts/score_caption.py"), "--caption", caption, str(path)],
                           capture_output=True, text=True)
        assert r.returncode == 2
        assert r.stderr == f"score_caption.py: {path}: {reason}\n"


def test_scenes_refuses_a_folder_as_its_output_file_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts/scenes.py"), "--count", "1", "--out-jsonl", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == f"scenes.py: --out-jsonl {tmp_path}: Is a directory\n"


def test_eval_default_model_stops_in_one_line_when_sjd_fails(tmp_path):
    # A failed `sjd batch` (here: no such model) was a CalledProcessError traceback after sjd's own message.
    import os

    sjd = pathlib.Path(os.environ.get("SJD_BUILD_DIR", ROOT / "build")) / "sjd"
    command = [sys.executable, str(ROOT / "scripts/eval_default_model.py"), "--count", "1", "--methods", "ar",
               "--out-dir", str(tmp_path / "eval")]
    missing = subprocess.run(command + ["--sjd", str(tmp_path / "no-sjd")], capture_output=True, text=True)
    assert missing.returncode == 2
    assert missing.stderr.endswith(f"{tmp_path / 'no-sjd'}: No such file or directory (--sjd: the built sjd)\n")
    if not sjd.is_file():
        pytest.skip(f"{sjd} not built")
    failed = subprocess.run(command + ["--sjd", str(sjd), "--model", str(tmp_path / "nope")], capture_output=True,
                            text=True)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert failed.stderr.endswith("eval_default_model: `sjd batch --method ar` exited 2 (its error is above)\n")

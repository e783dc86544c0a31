"""scripts/scenes.py (the default model's data) and the adherence scorer of scripts/eval_default_model.py.

The generator must be a pure function of (seed, split, index), its captions must say
exactly what is drawn, the held-out split must share no caption and no (colour, shape)
pair with training, and the scorer must pass the generator's own images and fail
images that break the caption.
"""
import hashlib
import json
import os
import pathlib
import re
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import eval_default_model  # noqa: E402
import scenes  # noqa: E402

TRAIN = [scenes.scene(0, "train", i) for i in range(400)]
EVAL = [scenes.scene(0, "eval", i) for i in range(100)]


def test_plain_scenes_are_those_every_model_so_far_was_trained_and_judged_on():
    # A digest of the first 200 training and evaluation scenes (and the pixels of 20 of each at 128 px), taken
    # with scenes.py before variety=True existed (commit 8b71883): the options must leave the plain scenes alone.
    h = hashlib.sha256()
    for split in ("train", "eval"):
        for i in range(200):
            s = scenes.scene(0, split, i)
            h.update(json.dumps(s, sort_keys=True).encode())
            if i < 20:
                h.update(scenes.render(s, 128).tobytes())
    assert h.hexdigest() == "ab24539e870fe1a224069bfa86b8ceb6b86c5f6c4620a51fbe4357be5ff0acb9"


def test_same_seed_and_index_give_the_same_scene_and_pixels():
    again = [scenes.scene(0, "train", i) for i in (37, 5, 12)]
    assert again == [TRAIN[37], TRAIN[5], TRAIN[12]]
    assert np.array_equal(scenes.render(again[0]), scenes.render(TRAIN[37]))
    other_seed = [scenes.scene(1, "train", i)["caption"] for i in range(20)]
    assert other_seed != [s["caption"] for s in TRAIN[:20]]


def test_every_feature_occurs():
    seen = {"kind": set(), "colour": set(), "shape": set(), "size": set(), "position": set(), "count": set(),
            "form": set()}
    for s in TRAIN:
        seen["kind"].add(s["background"]["kind"])
        seen["count"].add(len(s["objects"]))
        seen["form"].add(s["form"])
        for o in s["objects"]:
            for key in ("colour", "shape", "size", "position"):
                seen[key].add(o[key])
    assert seen["kind"] == {"solid", "gradient", "stripes"}  # the extra kinds are variety=True's alone
    assert seen["colour"] == set(scenes.COLOURS)
    assert seen["shape"] == set(scenes.SHAPES)
    assert seen["size"] == set(scenes.SIZES)
    assert seen["position"] == set(scenes.POSITIONS)
    assert seen["count"] == {1, 2, 3}
    assert seen["form"] == set(range(len(scenes.SENTENCE_FORMS)))


# A parser written from the sentence forms' wording, independent of the caption code.
OBJECT = re.compile(r"an? (small|large) (\w+) (circle|square|triangle|ring) "
                    r"(on the left|on the right|at the top|at the bottom|in the centre)")
PHRASE_TO_POSITION = {"on the left": "left", "on the right": "right", "at the top": "top",
                      "at the bottom": "bottom", "in the centre": "centre"}


def parse_background(caption):
    m = re.search(r"an? (\w+) to (\w+) gradient background", caption)
    if m:
        return {"kind": "gradient", "colours": [m.group(1), m.group(2)]}
    m = re.search(r"an? (\w+) and (\w+) striped background", caption)
    if m:
        return {"kind": "stripes", "colours": [m.group(1), m.group(2)]}
    m = re.search(r"an? (\w+) background", caption)
    return {"kind": "solid", "colours": [m.group(1)]}


def test_captions_say_exactly_what_is_drawn():
    for s in TRAIN + EVAL:
        caption = s["caption"]
        parsed = [{"size": m.group(1), "colour": m.group(2), "shape": m.group(3),
                   "position": PHRASE_TO_POSITION[m.group(4)]} for m in OBJECT.finditer(caption)]
        assert sorted(parsed, key=str) == sorted(s["objects"], key=str), caption
        assert parse_background(caption) == s["background"], caption
        image = scenes.render(s)
        labels = scenes.nearest_palette_index(image)
        for o in s["objects"]:
            # The drawn pixels have the named colour...
            assert (labels[scenes.object_mask(o)] == scenes.COLOURS.index(o["colour"])).all(), caption
            # ...which is none of the background's colours.
            assert o["colour"] not in s["background"]["colours"], caption
        assert len({o["position"] for o in s["objects"]}) == len(s["objects"])


VARIETY = [scenes.scene(0, "train", i, variety=True) for i in range(400)]


def test_variety_adds_horizontal_and_diagonal_stripes_and_keeps_the_rest():
    kinds = {}
    for s in VARIETY:
        kinds.setdefault(s["background"]["kind"], []).append(s)
        assert not {(o["colour"], o["shape"]) for o in s["objects"]} & scenes.HELD_OUT_PAIRS, s["caption"]
        labels = scenes.nearest_palette_index(scenes.render(s))
        for o in s["objects"]:
            assert (labels[scenes.object_mask(o)] == scenes.COLOURS.index(o["colour"])).all(), s["caption"]
    assert set(kinds) == set(scenes.BACKGROUND_KINDS)
    assert {s["background"]["rising"] for s in kinds["diagonal stripes"]} == {True, False}
    for kind, word in (("horizontal stripes", "horizontally"), ("diagonal stripes", "diagonally")):
        for s in kinds[kind]:
            first, second = s["background"]["colours"]
            assert f"{first} and {second} {word} striped background" in s["caption"]


ALL_PAIRS = [scenes.scene(0, "train", i, all_pairs=True) for i in range(3000)]


def test_all_pairs_draws_the_held_out_pairs_but_never_a_reserved_evaluation_caption():
    pairs = {(o["colour"], o["shape"]) for s in ALL_PAIRS for o in s["objects"]}
    assert pairs >= scenes.HELD_OUT_PAIRS
    seed, count = scenes.RESERVED_EVAL
    reserved = {scenes.scene(seed, "eval", i)["caption"] for i in range(count)}
    assert reserved == scenes.reserved_eval_captions()
    assert not {s["caption"] for s in ALL_PAIRS} & reserved
    # The rule is needed: among these indices, some first draws had a reserved caption and were drawn again.
    first_draws = [scenes._draw(scenes._rng(0, "train", i), "train", False, True) for i in range(len(ALL_PAIRS))]
    redrawn = [i for i, s in enumerate(first_draws) if s["caption"] in reserved]
    assert redrawn
    assert all(ALL_PAIRS[i] == s for i, s in enumerate(first_draws) if i not in redrawn)
    for s in ALL_PAIRS[:200]:
        labels = scenes.nearest_palette_index(scenes.render(s))
        for o in s["objects"]:
            assert (labels[scenes.object_mask(o)] == scenes.COLOURS.index(o["colour"])).all(), s["caption"]
    with pytest.raises(ValueError, match="all_pairs is a training option"):
        scenes.scene(0, "eval", 0, all_pairs=True)


@pytest.mark.parametrize("rising, slope", [(True, -1 / 3 ** 0.5), (False, 1 / 3 ** 0.5)])
def test_stripes_run_along_a_squares_top_and_a_triangles_sides(rising, slope):
    size = 128
    horizontal = scenes.render_background({"kind": "horizontal stripes", "colours": ["red", "blue"]}, size)
    assert (horizontal == horizontal[:, :1]).all()  # each row one colour
    rows = scenes.nearest_palette_index(horizontal[:, 0])
    assert (np.diff(rows) != 0).sum() == 7  # 8 stripes of 16 px
    # Diagonal: the first colour change along each row moves by 1/sqrt(3) px per row (edges 60 degrees from the
    # horizontal, as the triangle's sides): to the left going down when rising ("/"), to the right when falling.
    diagonal = scenes.nearest_palette_index(scenes.render_background(
        {"kind": "diagonal stripes", "colours": ["red", "blue"], "rising": rising}, size))
    track = [size // 2]  # the edge nearest the middle of the top row, followed down half the image
    for row in diagonal[:size // 2]:
        changes = np.flatnonzero(np.diff(row) != 0)
        track.append(int(changes[np.abs(changes - track[-1]).argmin()]))
    assert np.polyfit(np.arange(size // 2), track[1:], 1)[0] == pytest.approx(slope, abs=0.02)


def test_the_report_grid_takes_each_background_kind_of_the_scenes_in_turn():
    indices = eval_default_model.grid_indices(EVAL, 9)
    assert len(indices) == 9 and len(set(indices)) == 9
    assert [EVAL[i]["background"]["kind"] for i in indices] == ["solid", "gradient", "stripes"] * 3


def test_objects_never_overlap():
    for s in TRAIN:
        masks = [scenes.object_mask(o) for o in s["objects"]]
        total = sum(m.astype(int) for m in masks)
        assert total.max() <= 1, s["caption"]


def test_held_out_split_is_disjoint_from_training():
    train_captions = {s["caption"] for s in TRAIN}
    assert not train_captions & {s["caption"] for s in EVAL}
    for s in TRAIN:
        assert not {(o["colour"], o["shape"]) for o in s["objects"]} & scenes.HELD_OUT_PAIRS, s["caption"]
    for s in EVAL:
        assert {(o["colour"], o["shape"]) for o in s["objects"]} & scenes.HELD_OUT_PAIRS, s["caption"]


def test_scorer_passes_the_generators_own_images():
    for s in EVAL:
        result = eval_default_model.adherence(scenes.render(s), s)
        assert all(result["objects"]) and result["background"], s["caption"]
        assert result["misses"] == [None] * len(s["objects"])


def test_scorer_fails_wrong_colours_and_missing_objects():
    s = next(s for s in EVAL if s["background"]["kind"] == "solid" and len(s["objects"]) >= 2)
    # Each miss says what was drawn instead: the colour there, or nothing (the background).
    instead = [next(c for c in scenes.COLOURS if c not in (o["colour"], *s["background"]["colours"]))
               for o in s["objects"]]
    wrong_colour = scenes.render({**s, "objects": [{**o, "colour": c} for o, c in zip(s["objects"], instead)]})
    result = eval_default_model.adherence(wrong_colour, s)
    assert not any(result["objects"]) and result["misses"] == instead
    missing = scenes.render({**s, "objects": s["objects"][1:]})
    result = eval_default_model.adherence(missing, s)
    assert result["objects"] == [False] + [True] * (len(s["objects"]) - 1)
    assert result["misses"] == ["absent"] + [None] * (len(s["objects"]) - 1)
    # On stripes or a gradient either background colour there is "absent", not a colour the model fell back on.
    # (A gradient through the object's colour can pass for it: such an object counts as drawn and is left out.)
    absent = 0
    for kind in ("stripes", "gradient"):
        for t in [t for t in EVAL if t["background"]["kind"] == kind][:10]:
            result = eval_default_model.adherence(scenes.render({**t, "objects": t["objects"][1:]}), t)
            if not result["objects"][0]:
                assert result["misses"][0] == "absent", t["caption"]
                absent += 1
    assert absent >= 15
    # Stripes that pass over the object's place in their other colour: still the background, not a fallback.
    # (Objects sit on stripe edges, so both stripe colours hold half of its place: the one painted over it is the
    # one a plain majority vote would not pick.)
    for t in [t for t in EVAL if t["background"]["kind"] == "stripes"][:10]:
        mask = scenes.object_mask(t["objects"][0])
        there = np.bincount(scenes.nearest_palette_index(scenes.render_background(t["background"])[mask]),
                            minlength=len(scenes.COLOURS))
        image = scenes.render({**t, "objects": t["objects"][1:]})
        image[mask] = scenes.PALETTE[scenes.COLOURS[there.argsort(kind="stable")[-1]]]
        assert eval_default_model.adherence(image, t)["misses"][0] == "absent", t["caption"]
    other_background = next(c for c in scenes.COLOURS if c not in [o["colour"] for o in s["objects"]] +
                            s["background"]["colours"])
    recoloured = scenes.render({**s, "background": {"kind": "solid", "colours": [other_background]}})
    assert not eval_default_model.adherence(recoloured, s)["background"]
    # Stripes in the wrong phase (colours swapped) are wrong too.
    striped = next(s for s in EVAL if s["background"]["kind"] == "stripes")
    swapped = {**striped, "background": {**striped["background"], "colours": striped["background"]["colours"][::-1]}}
    assert not eval_default_model.adherence(scenes.render(swapped), striped)["background"]


@pytest.mark.parametrize("size, most_ambiguous", [(64, 0.35), (128, 0.04)])
def test_scorer_fails_an_object_drawn_in_another_shape(size, most_ambiguous):
    """A filled circle for a ring (it covers the ring's pixels), a square for a circle: right colour and place,
    wrong shape. Only where the true scene's own pixels cannot tell the shapes apart does the colour alone decide:
    a gradient band of the object's colour around it, and at 64 px a small circle and a small square, whose masks differ in
    a few pixels (intersection over union 0.94)."""
    x, y = scenes.pixel_grid(size)
    checked = ambiguous = 0
    for s in EVAL[:40]:
        truth = scenes.nearest_palette_index(scenes.render(s, size))
        background = scenes.nearest_palette_index(scenes.render_background(s["background"], size))
        for i, o in enumerate(s["objects"]):
            others = np.zeros((size, size), dtype=bool)
            for j, p in enumerate(s["objects"]):
                if j != i:
                    others |= scenes.object_mask(p, size)
            ious = eval_default_model._shape_ious(truth, o, size, x, y, background, others)
            if any(eval_default_model._takes_shape(ious, other) for other in scenes.SHAPES if other != o["shape"]):
                ambiguous += 1
                continue
            for other in scenes.SHAPES:
                if other != o["shape"]:
                    drawn = {**s, "objects": [{**p, "shape": other} if j == i else p for j, p in enumerate(s["objects"])]}
                    result = eval_default_model.adherence(scenes.render(drawn, size), s)
                    assert result["objects"] == [j != i for j in range(len(s["objects"]))], (s["caption"], other)
                    assert result["misses"][i] == "shape", (s["caption"], other)
                    checked += 1
    objects = sum(len(s["objects"]) for s in EVAL[:40])
    assert checked == 3 * (objects - ambiguous) and ambiguous <= most_ambiguous * objects, (ambiguous, objects)


def test_shape_test_leaves_out_a_neighbour_of_the_same_colour():
    # A large red square on the left reaches into the disc around a large red circle in the centre; its pixels
    # must not count for or against the circle's shape.
    circle = {"size": "large", "colour": "red", "shape": "circle", "position": "centre"}
    square = {"size": "large", "colour": "red", "shape": "square", "position": "left"}
    s = {"background": {"kind": "solid", "colours": ["white"]}, "objects": [circle, square]}
    size = 128
    x, y = scenes.pixel_grid(size)
    labels = scenes.nearest_palette_index(scenes.render(s, size))
    background = scenes.nearest_palette_index(scenes.render_background(s["background"], size))
    others = scenes.object_mask(square, size)
    nothing = np.zeros_like(others)
    assert eval_default_model._shape_ious(labels, circle, size, x, y, background, others)["circle"] == 1.0
    assert eval_default_model._shape_ious(labels, circle, size, x, y, background, nothing)["circle"] < 1.0


def test_png_round_trip(tmp_path):
    image = scenes.render(EVAL[0])
    eval_default_model.write_png(tmp_path / "a.png", image)
    assert np.array_equal(eval_default_model.read_png(tmp_path / "a.png"), image)


def test_unknown_split_is_an_error():
    with pytest.raises(ValueError, match="validation"):
        scenes.scene(0, "validation", 0)


def test_prompts_file_holds_the_captions_in_order(tmp_path):
    out = tmp_path / "prompts.jsonl"
    assert scenes.main(["--split", "eval", "--start", "3", "--count", "4", "--out-jsonl", str(out), "--prompts"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == [{"prompt": EVAL[i]["caption"]} for i in range(3, 7)]

class _PixelsAsCodes:
    """A stand-in VQGAN whose 'codes' are the pixels themselves, decoded by `paint` (for the ceiling mode)."""

    def __init__(self, paint):
        self.paint = paint

    def encode(self, x):
        self.side = x.shape[-1]
        return x, x

    def decode_codes(self, codes):
        return self.paint(codes)


@pytest.mark.parametrize("size", [64, 128])
@pytest.mark.parametrize("paint, perfect", [(lambda x: x, True), (lambda x: -x, False)])
def test_reconstruction_ceiling_scores_what_the_vqgan_gives_back(monkeypatch, paint, perfect, size):
    import train_vq
    stand_in = _PixelsAsCodes(paint)
    monkeypatch.setattr(train_vq, "load", lambda vq_dir: stand_in)
    # 40 scenes: two chunks of the 32 the mode encodes at a time.
    r = eval_default_model.reconstruction_score("unused", EVAL[:40], size)
    assert stand_in.side == size
    rates = (r["object"][0], r["background"][0], r["scene"][0])
    # A lossless tokenizer reaches the ceiling; one that inverts the colours misses almost everything.
    assert rates == (1.0, 1.0, 1.0) if perfect else max(rates) < 0.3


def test_parse_caption_inverts_caption():
    for s in TRAIN + EVAL:
        assert scenes.parse_caption(s["caption"]) == s, s["caption"]
    # A caption may list its objects in any order; the scene is the same.
    swapped = scenes.parse_caption("a large blue square on the right and a small red circle on the left, on a "
                                   "yellow background")
    assert [o["position"] for o in swapped["objects"]] == ["left", "right"]


@pytest.mark.parametrize("text, complaint", [
    ("a red apple", "not a scene caption"),
    ("a small red circle on the left, on a yellow", "not a scene caption"),
    ("a small red circle on the left and a small blue ring on the left, on a white background", "own position"),
    ("a small red circle on the left, a small blue ring at the top, a small green square in the centre and a "
     "small black ring on the right, on a white background", "one to three"),
    ("on a red and red striped background, a small blue ring at the top", "two different colours"),
])
def test_parse_caption_says_what_does_not_parse(text, complaint):
    with pytest.raises(ValueError, match=complaint):
        scenes.parse_caption(text)


def test_captions_mode_scores_each_caption_over_its_seeds(tmp_path, monkeypatch, capsys):
    """--captions: every caption drawn --repeat times, a line per caption. A stand-in for sjd draws the
    truth for the first caption and drops the objects of the second, so the lines must say 2/2 and 0/2."""
    captions = ["a large white ring on the left, on a purple background",
                "a red to yellow gradient background with a large blue circle in the centre"]
    (tmp_path / "captions.txt").write_text("# examples\n" + "\n".join(captions) + "\n")

    def fake_batch(sjd, model, prompts_file, out_dir, method, seed, extra):
        os.makedirs(out_dir, exist_ok=True)
        records = {}
        with open(prompts_file, encoding="utf-8") as f:
            for i, line in enumerate(f):
                s = scenes.parse_caption(json.loads(line)["prompt"])
                drawn = s if i < 2 else {**s, "objects": []}
                eval_default_model.write_png(os.path.join(out_dir, f"{i}.png"), scenes.render(drawn))
                records[i] = {"file": f"{i}.png", "steps": 277, "tokens": 277, "seconds": 0.1}
        return records

    monkeypatch.setattr(eval_default_model, "run_method", fake_batch)
    assert eval_default_model.main(["--captions", str(tmp_path / "captions.txt"), "--repeat", "2", "--methods", "ar",
                                    "--out-dir", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert f"2/2 right (objects 2/2, background 2/2): {captions[0]}" in out
    assert f"0/2 right (objects 0/2, background 2/2): {captions[1]}" in out
    assert json.loads((tmp_path / "out" / "results.json").read_text())["repeat"] == 2


def test_objects_are_also_scored_by_kind_held_out_pairs_apart(tmp_path, monkeypatch, capsys):
    """A stand-in for sjd draws each scene without its held-out objects and skips the last image: the held-out
    pairs must come out 0 of theirs, the seen shapes all right but the skipped image's. (Solid backgrounds
    only: a gradient can pass for an object of its blend's colour, which the scorer allows.)"""
    chosen = [s for s in (scenes.scene(0, "eval", i) for i in range(60)) if s["background"]["kind"] == "solid"][:10]
    (tmp_path / "captions.txt").write_text("\n".join(s["caption"] for s in chosen) + "\n")

    def fake_batch(sjd, model, prompts_file, out_dir, method, seed, extra):
        os.makedirs(out_dir, exist_ok=True)
        records = {}
        with open(prompts_file, encoding="utf-8") as f:
            for i, line in enumerate(f.readlines()[:-1]):
                s = scenes.parse_caption(json.loads(line)["prompt"])
                seen = [o for o in s["objects"] if (o["colour"], o["shape"]) not in scenes.HELD_OUT_PAIRS]
                eval_default_model.write_png(os.path.join(out_dir, f"{i}.png"), scenes.render({**s, "objects": seen}))
                records[i] = {"file": f"{i}.png", "steps": 277, "tokens": 277, "seconds": 0.1}
        return records

    monkeypatch.setattr(eval_default_model, "run_method", fake_batch)
    assert eval_default_model.main(["--captions", str(tmp_path / "captions.txt"), "--methods", "ar",
                                    "--out-dir", str(tmp_path / "out")]) == 0
    by_kind = json.loads((tmp_path / "out" / "results.json").read_text())["methods"]["ar"]["object_by_kind"]
    expected = {}
    for i, s in enumerate(chosen):
        for o in s["objects"]:
            held_out = (o["colour"], o["shape"]) in scenes.HELD_OUT_PAIRS
            kind = f"held-out {o['colour']} {o['shape']}" if held_out else f"seen {o['shape']}s"
            right, of = expected.get(kind, (0, 0))
            expected[kind] = (right + (not held_out and i < len(chosen) - 1), of + 1)
    assert {k: tuple(v) for k, v in by_kind.items()} == expected
    assert any(k.startswith("held-out") for k in expected) and any(k.startswith("seen") for k in expected)
    assert "objects by kind: " + ", ".join(f"{k} {r}/{n}" for k, (r, n) in sorted(expected.items())) in \
        capsys.readouterr().out


def test_captions_mode_refuses_a_caption_it_cannot_score(tmp_path, capsys):
    (tmp_path / "captions.txt").write_text("a large white ring on the left, on a purple background\na red apple\n")
    assert eval_default_model.main(["--captions", str(tmp_path / "captions.txt")]) == 2
    err = capsys.readouterr().err
    assert "captions.txt" in err and "a red apple" in err
    (tmp_path / "captions.jsonl").write_text('{"prompt": "a large white ring on the left, on a purple background"}\n'
                                             '{"text": "no prompt field"}\n')
    assert eval_default_model.main(["--captions", str(tmp_path / "captions.jsonl")]) == 2
    assert 'captions.jsonl: line 2 has no "prompt"' in capsys.readouterr().err


def test_the_prompt_file_is_written_into_a_folder_made_for_it(tmp_path):
    # README's "Using it" writes out/captions.jsonl before anything else has made out/.
    target = tmp_path / "out" / "captions.jsonl"
    assert scenes.main(["--split", "eval", "--count", "3", "--out-jsonl", str(target), "--prompts"]) == 0
    lines = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert [line["prompt"] for line in lines] == [scenes.scene(0, "eval", i)["caption"] for i in range(3)]

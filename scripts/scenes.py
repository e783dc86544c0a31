#!/usr/bin/env python3
"""Captioned synthetic scenes: the training data and ground truth of the default model.

A scene is a background (solid colour, a two-colour top-to-bottom gradient, or
two-colour vertical stripes) with one to three objects (circle, square,
triangle, ring), each with a colour, a size (small, large) and a position
(left, right, top, bottom, centre). The caption says all of it in one of a few
sentence forms, for example
"a small red circle on the left and a large blue square on the right, on a yellow background".

scene(..., variety=True) also draws horizontal and diagonal stripes ("a red and blue horizontally striped
background"), a training option (train_default_model.py --background-variety); parse_caption and the
evaluation split keep to the three kinds above.

Everything is a pure function of (seed, split, index): scene(seed, "train", 5)
is the same scene on every machine, whatever else was generated before.
Training scenes never contain a HELD_OUT_PAIRS (colour, shape) object;
evaluation scenes always contain one, so no evaluation caption appears in training.
scene(..., all_pairs=True) lets training scenes draw every pair, the held-out ones included (what a model that
should draw any caption of this grammar trains on, train_default_model.py --all-pairs); such a scene never has
the caption of an evaluation scene of RESERVED_EVAL (seed 0, indices below RESERVED_EVAL[1]), so the
evaluation captions stay unseen while their (colour, shape) pairs are not.

  scripts/scenes.py --split eval --count 8 --out-jsonl scenes.jsonl   (writes scenes as JSON lines)
  scripts/scenes.py --split eval --count 8 --out-jsonl prompts.jsonl --prompts   (captions, as `sjd batch` reads)
"""
import argparse
import json
import os
import re
import sys

import numpy as np

IMAGE_SIZE = 64

# Few, well separated colours, so a small model can learn them and a scorer can tell them apart.
PALETTE = {
    "red": (220, 40, 40),
    "orange": (245, 140, 30),
    "yellow": (240, 215, 40),
    "green": (40, 170, 70),
    "blue": (40, 80, 220),
    "purple": (140, 60, 180),
    "white": (245, 245, 245),
    "black": (25, 25, 25),
}
COLOURS = list(PALETTE)
SHAPES = ["circle", "square", "triangle", "ring"]
# Geometry in fractions of the image side. Circumradius by size:
SIZES = {"small": 9.0 / 128.0, "large": 15.0 / 128.0}
# Object centres (x, y). Neighbouring centres are a quarter of the side apart, so two large objects never touch.
POSITIONS = {
    "left": (0.25, 0.5),
    "right": (0.75, 0.5),
    "top": (0.5, 0.25),
    "bottom": (0.5, 0.75),
    "centre": (0.5, 0.5),
}
# Captions list objects in this order, whatever order they were drawn in.
POSITIONS_ORDER = ["left", "top", "centre", "bottom", "right"]
POSITION_PHRASES = {
    "left": "on the left",
    "right": "on the right",
    "top": "at the top",
    "bottom": "at the bottom",
    "centre": "in the centre",
}
BACKGROUND_KINDS = ["solid", "gradient", "stripes", "horizontal stripes", "diagonal stripes"]
# The evaluation split and a plain training split draw the first three kinds; training with variety=True draws all
# five. The two extra kinds show every colour pair meeting along horizontal and 60-degree edges (a square's top,
# a triangle's sides) with no object there, so that local geometry is seen in every colour, the held-out pairs'
# included, while no held-out pair is (docs/default_model.md).
KIND_WEIGHTS = [0.5, 0.25, 0.25]
VARIETY_KIND_WEIGHTS = [0.3, 0.15, 0.15, 0.2, 0.2]
STRIPE_FRACTION = 1.0 / 8.0  # stripe width: 8 px at 64 px, a multiple of the VQ's patch, so no patch straddles two
# vertical or horizontal stripes (diagonal ones cross patches, as a triangle's sides do)
# One pair per shape; their colours and shapes still appear in training, only never together.
HELD_OUT_PAIRS = {("red", "triangle"), ("blue", "ring"), ("yellow", "square"), ("purple", "circle")}
SPLITS = {"train": 0, "eval": 1}
# (scene seed, count) of the evaluation scenes whose captions all-pairs training scenes never repeat: every
# figure in docs/ is taken on seed 0 below index 400. About 0.6% of all-pairs scenes would repeat one.
RESERVED_EVAL = (0, 1000)
_reserved_captions = None


def object_kind(o):
    """Held-out pairs one by one, seen pairs by shape: where a model's misses lie (the scorers report by it)."""
    if (o["colour"], o["shape"]) in HELD_OUT_PAIRS:
        return f"held-out {o['colour']} {o['shape']}"
    return f"seen {o['shape']}s"


def _rng(seed, split, index):
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is unknown (known: {', '.join(SPLITS)})")
    return np.random.default_rng(np.random.SeedSequence([seed, SPLITS[split], index]))


def _pick(rng, items):
    return items[int(rng.integers(len(items)))]


def reserved_eval_captions():
    """The captions all-pairs training scenes avoid (RESERVED_EVAL), computed once."""
    global _reserved_captions
    if _reserved_captions is None:
        seed, count = RESERVED_EVAL
        _reserved_captions = frozenset(scene(seed, "eval", i)["caption"] for i in range(count))
    return _reserved_captions


def scene(seed, split, index, variety=False, all_pairs=False):
    """The index-th scene of a split: a dict with background, objects and caption. variety=True draws the
    background from all of BACKGROUND_KINDS, all_pairs=True (training only) objects of every (colour, shape)
    pair: each gives another scene for the same index."""
    if all_pairs and split != "train":
        raise ValueError(f"all_pairs is a training option (split {split!r})")
    rng = _rng(seed, split, index)
    while True:  # an all-pairs scene with a reserved evaluation caption is drawn again from the same stream
        result = _draw(rng, split, variety, all_pairs)
        if not all_pairs or result["caption"] not in reserved_eval_captions():
            return result


def _draw(rng, split, variety, all_pairs):
    weights = VARIETY_KIND_WEIGHTS if variety else KIND_WEIGHTS
    kind = BACKGROUND_KINDS[int(rng.choice(len(weights), p=weights))]
    background_colours = [_pick(rng, COLOURS)]
    if kind != "solid":
        background_colours.append(_pick(rng, [c for c in COLOURS if c != background_colours[0]]))
    background = {"kind": kind, "colours": background_colours}
    if kind == "diagonal stripes":  # rising or falling, as a triangle's left or right side; the caption does not say
        background["rising"] = bool(rng.integers(2))
    count = int(rng.choice([1, 2, 3], p=[0.4, 0.4, 0.2]))
    positions = [POSITIONS_ORDER[i] for i in rng.permutation(len(POSITIONS_ORDER))[:count]]
    object_colours = [c for c in COLOURS if c not in background_colours]
    objects = []
    for n, position in enumerate(positions):
        while True:
            colour, shape = _pick(rng, object_colours), _pick(rng, SHAPES)
            held_out = (colour, shape) in HELD_OUT_PAIRS
            # Evaluation scenes hold out their first object; training scenes never show a held-out pair (unless
            # all_pairs).
            wanted = held_out if (split == "eval" and n == 0) else (all_pairs or not held_out)
            if wanted:
                break
        objects.append({"size": _pick(rng, list(SIZES)), "colour": colour, "shape": shape, "position": position})
    objects.sort(key=lambda o: POSITIONS_ORDER.index(o["position"]))
    form = int(rng.integers(len(SENTENCE_FORMS)))
    result = {"background": background, "objects": objects, "form": form}
    result["caption"] = caption(result)
    return result


def _object_phrase(o):
    return f"a {o['size']} {o['colour']} {o['shape']} {POSITION_PHRASES[o['position']]}"


def _with_article(phrase):
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _background_phrase(b):
    colours = b["colours"]
    if b["kind"] == "solid":
        return _with_article(f"{colours[0]} background")
    if b["kind"] == "gradient":
        return _with_article(f"{colours[0]} to {colours[1]} gradient background")
    if b["kind"] == "stripes":
        return _with_article(f"{colours[0]} and {colours[1]} striped background")
    return _with_article(f"{colours[0]} and {colours[1]} {b['kind'].split()[0]}ly striped background")


def _listing(phrases):
    if len(phrases) == 1:
        return phrases[0]
    return ", ".join(phrases[:-1]) + " and " + phrases[-1]


SENTENCE_FORMS = [
    lambda objects, background: f"{objects}, on {background}",
    lambda objects, background: f"{background} with {objects}",
    lambda objects, background: f"on {background}, {objects}",
]


def caption(s):
    """The caption of a scene dict (background, objects, form)."""
    objects = _listing([_object_phrase(o) for o in s["objects"]])
    return SENTENCE_FORMS[s["form"]](objects, _background_phrase(s["background"]))


def _alternatives(words):
    return "(" + "|".join(re.escape(w) for w in words) + ")"


_OBJECT = (f"an? {_alternatives(SIZES)} {_alternatives(COLOURS)} {_alternatives(SHAPES)} "
           f"{_alternatives(POSITION_PHRASES.values())}")
_BACKGROUND = (f"an? (?:{_alternatives(COLOURS)} background|{_alternatives(COLOURS)} to {_alternatives(COLOURS)} "
               f"gradient background|{_alternatives(COLOURS)} and {_alternatives(COLOURS)} striped background)")
# The sentence forms of SENTENCE_FORMS, in the same order.
_FORMS = [re.compile(f"(?P<objects>.+), on (?P<background>{_BACKGROUND})"),
          re.compile(f"(?P<background>{_BACKGROUND}) with (?P<objects>.+)"),
          re.compile(f"on (?P<background>{_BACKGROUND}), (?P<objects>.+)")]
_LISTING = re.compile(f"{_OBJECT}(?:, {_OBJECT})*(?: and {_OBJECT})?")


def parse_caption(text):
    """The scene dict a caption in this module's grammar describes (the inverse of caption()), so that
    any such prompt, not only a generated one, can be scored. ValueError says what does not parse."""
    text = text.strip()
    for form, pattern in enumerate(_FORMS):
        m = pattern.fullmatch(text)
        if m and _LISTING.fullmatch(m["objects"]):
            break
    else:
        raise ValueError(f"not a scene caption (a background and one to three objects in scenes.py's words): {text!r}")
    b = re.fullmatch(_BACKGROUND, m["background"]).groups()
    if b[0]:
        background = {"kind": "solid", "colours": [b[0]]}
    else:
        kind = "gradient" if b[1] else "stripes"
        background = {"kind": kind, "colours": [c for c in b[1:] if c]}
        if background["colours"][0] == background["colours"][1]:
            raise ValueError(f"a {m['background']!r} needs two different colours: {text!r}")
    by_phrase = {phrase: position for position, phrase in POSITION_PHRASES.items()}
    objects = [{"size": size, "colour": colour, "shape": shape, "position": by_phrase[where]}
               for size, colour, shape, where in re.findall(_OBJECT, m["objects"])]
    positions = [o["position"] for o in objects]
    if len(objects) > 3 or len(set(positions)) != len(positions):
        raise ValueError(f"one to three objects, each at its own position: {text!r}")
    objects.sort(key=lambda o: POSITIONS_ORDER.index(o["position"]))
    return {"background": background, "objects": objects, "form": form, "caption": text}


def pixel_grid(size=IMAGE_SIZE):
    """Pixel-centre coordinates (x, y), each [size, size]."""
    centres = np.arange(size, dtype=np.float64) + 0.5
    return np.meshgrid(centres, centres)


def object_mask(o, size=IMAGE_SIZE):
    """Boolean [size, size] mask of the pixels an object covers."""
    x, y = pixel_grid(size)
    cx, cy = (size * f for f in POSITIONS[o["position"]])
    r = size * SIZES[o["size"]]
    dx, dy = x - cx, y - cy
    if o["shape"] == "circle":
        return dx * dx + dy * dy <= r * r
    if o["shape"] == "ring":
        d2 = dx * dx + dy * dy
        return (d2 <= r * r) & (d2 >= (0.55 * r) ** 2)
    if o["shape"] == "square":
        half = 0.85 * r
        return (np.abs(dx) <= half) & (np.abs(dy) <= half)
    if o["shape"] == "triangle":
        # Upward equilateral triangle, a little larger than the circumradius so its area matches the others.
        R = 1.2 * r
        base_y = R / 2.0
        inside_base = dy <= base_y
        # The two slanted sides: |dx| <= (dy + R) / sqrt(3).
        inside_sides = np.abs(dx) * np.sqrt(3.0) <= dy + R
        return inside_base & inside_sides
    raise ValueError(f"shape {o['shape']!r} is unknown (known: {', '.join(SHAPES)})")


def _colour(name):
    return np.array(PALETTE[name], dtype=np.float64)


def render_background(b, size=IMAGE_SIZE):
    x, y = pixel_grid(size)
    first = _colour(b["colours"][0])
    if b["kind"] == "solid":
        return np.broadcast_to(first, (size, size, 3)).copy()
    second = _colour(b["colours"][1])
    if b["kind"] == "gradient":
        t = (y / size)[..., None]
        return first * (1.0 - t) + second * t
    across = {"stripes": x, "horizontal stripes": y}.get(b["kind"])  # the coordinate across the stripes
    if b["kind"] == "diagonal stripes":
        # Edges 60 degrees from the horizontal (y points down): rising ones run along (1, -sqrt(3)) / 2, as a
        # triangle's left side, falling ones along (1, sqrt(3)) / 2, as its right side.
        across = x * np.sqrt(0.75) + (0.5 if b["rising"] else -0.5) * y
    if across is not None:
        odd = ((np.floor(across / (size * STRIPE_FRACTION)).astype(np.int64) % 2) == 1)[..., None]
        return np.where(odd, second, first)
    raise ValueError(f"background kind {b['kind']!r} is unknown (known: {', '.join(BACKGROUND_KINDS)})")


def render(s, size=IMAGE_SIZE):
    """uint8 [size, size, 3] RGB image of a scene dict."""
    image = render_background(s["background"], size)
    for o in s["objects"]:
        image[object_mask(o, size)] = _colour(o["colour"])
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def nearest_palette_index(pixels):
    """[..., 3] RGB -> [...] index into COLOURS of the nearest palette colour (Euclidean in RGB)."""
    table = np.array([PALETTE[c] for c in COLOURS], dtype=np.float64)
    d = ((np.asarray(pixels, dtype=np.float64)[..., None, :] - table) ** 2).sum(-1)
    return d.argmin(-1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", default="eval", choices=list(SPLITS))
    parser.add_argument("--start", type=int, default=0, help="first scene index")
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--out-jsonl", required=True, help="where to write one scene per line")
    parser.add_argument("--prompts", action="store_true", help='write {"prompt": caption} lines, sjd\'s prompt files')
    args = parser.parse_args(argv)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(args.out_jsonl)), exist_ok=True)  # as sjd makes its folders
        with open(args.out_jsonl, "w", encoding="utf-8", newline="\n") as out:
            for i in range(args.start, args.start + args.count):
                s = scene(args.seed, args.split, i)
                out.write(json.dumps({"prompt": s["caption"]} if args.prompts else s) + "\n")
    except OSError as e:  # a folder given as the file, a read-only place: one line, not a traceback
        print(f"scenes.py: --out-jsonl {args.out_jsonl}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

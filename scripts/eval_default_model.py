#!/usr/bin/env python3
"""Scores the default model's prompt adherence per decoding method, from the generator's ground truth.

  scripts/eval_default_model.py [--model models/default] [--sjd build/sjd] [--count 48] [--split eval --start 0]
      [--methods ar,jacobi,sjd,scd-mc,scd-gs,sjd-pac,sjd-pac+cool,sjd-pac+lantern] [--out-dir DIR]
      [--grid docs/default_model_grid.png]
  scripts/eval_default_model.py --captions FILE [--repeat 4] [--methods ar]
  scripts/eval_default_model.py --vq-dir out/default-model/vq [--count 200]

Takes --count scenes of scenes.py from --start: by default the evaluation split, whose captions
never occur in training (each holds a held-out colour-shape pair, which v1-v3 never saw; v4's all-pairs training
scenes avoid the captions of scenes.RESERVED_EVAL, seed 0 below index 1000); `--split train --start 16000`
gives unseen scenes of seen combinations (the model trained on train scenes 0..15999).
Generates one image per caption and method with `sjd batch` (same seeds for every method:
batch seed + prompt index), reads the PNGs back and checks against each scene's ground truth:
  object      the stated colour covers at least half of the object's true shape, at its stated
              position and size (nearest palette colour per pixel), and its pixels near there
              take the stated shape: of the four shapes' masks the stated one matches them about
              as well as the best (intersection over union), so a filled circle is no ring;
  background  solid: its colour covers half of the pixels away from the objects; gradient:
              the first colour fills the top eighth and the second the bottom eighth; stripes:
              the pixels of each stripe have the stripe's colour (half of them or more);
  scene       every object and the background right.
Reports per method the three rates with a 95% interval (and their difference from the
first method's, with the interval of the difference: a lossless method should include 0),
the mean steps and step compression (tokens / forward passes) and the mean seconds per image
(each image's latency as the manifest records it: at `--batch-size B` it shares its steps with
B - 1 others, so this is about B / images per second, not the throughput); then the objects by
kind (each held-out pair apart, the seen pairs by shape) and what the missed ones were drawn as:
"shape" (their colour there in another shape), "absent" (the background there), or the colour
that took their place, which says which seen pair the model fell back on; writes results.json
(object_by_kind, object_misses_by_kind).
A method name `M+R` runs M with the LOSSY `--relax R` acceptance (cool, uniform, lantern).

--captions scores your own prompts instead of generated scenes: any caption in the scenes'
grammar (scenes.parse_caption; one per line, `#` lines skipped, or a .jsonl with "prompt"), each
drawn --repeat times with consecutive seeds, and prints per caption how many of its images are
right. This is how the README's examples and the demo prompt are chosen.

--vq-dir (a train_vq.py folder: the bundle keeps only the decoder) scores the VQGAN's own
reconstructions of the same scenes instead: the codes that encode the ground truth, decoded.
That is the ceiling of any transformer drawing with this tokenizer, so a low one says the
tokenizer, not the transformer, is what to improve.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenes  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEFAULT_METHODS = "ar,jacobi,sjd,scd-mc,scd-gs,sjd-pac,sjd-pac+cool,sjd-pac+lantern"
HALF = 0.5  # share of a region that must have the stated colour
# How much worse than the best-matching shape the stated one may match an object's pixels. At 128 px two different
# shapes' masks overlap by at most 0.82 (circle and square; a filled circle and a ring 0.70), so a shape drawn
# cleanly is told from every other; the VQGAN gives a small circle back a little square, and 0.1 keeps most of
# those circles (its 128 px ceiling still misses a few). At 64 px a small circle and square overlap by 0.94: there
# the two cannot be told apart, and coverage decides (see adherence).
SHAPE_MARGIN = 0.1


# --------------------------------------------------------------------------- PNG files


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def read_png(path):
    """uint8 [H, W, 3] of an 8-bit RGB or RGBA, non-interlaced PNG (what sjd writes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace != 0:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs are read "
                         f"(found depth {depth}, colour type {colour_type}, interlace {interlace})")
    channels = 3 if colour_type == 2 else 4
    stride = width * channels
    raw = zlib.decompress(idat)
    rows, previous = [], np.zeros(stride, dtype=np.int64)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1).astype(np.int64)
        if kind == 0:
            out = line
        elif kind == 2:
            out = (line + previous) % 256
        elif kind in (1, 3, 4):
            out = line.copy()
            for x in range(stride):
                left = out[x - channels] if x >= channels else 0
                up, up_left = previous[x], (previous[x - channels] if x >= channels else 0)
                guess = left if kind == 1 else ((left + up) // 2 if kind == 3 else _paeth(left, up, up_left))
                out[x] = (line[x] + guess) % 256
        else:
            raise ValueError(f"{path}: row {y} has unknown filter type {kind}")
        rows.append(out)
        previous = out
    return np.stack(rows).reshape(height, width, channels)[..., :3].astype(np.uint8)


def write_png(path, image):
    """uint8 [H, W, 3] -> an RGB PNG file."""
    height, width, _ = image.shape
    raw = b"".join(b"\x00" + image[y].tobytes() for y in range(height))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


# --------------------------------------------------------------------------- adherence


def _share(labels, mask, colour):
    return float((labels[mask] == scenes.COLOURS.index(colour)).mean()) if mask.any() else 0.0


def _around(o, size, x, y):
    """Mask of the pixels within 1.4 radii of an object's centre (its circumradius plus a third)."""
    cx, cy = (size * f for f in scenes.POSITIONS[o["position"]])
    r = size * scenes.SIZES[o["size"]] * 1.4
    return (x - cx) ** 2 + (y - cy) ** 2 <= r * r


def _shape_ious(labels, o, size, x, y, background_labels, neighbours):
    """{shape: intersection over union of its mask, at the object's stated place and size, with the pixels of
    the object's colour within 1.4 radii of its centre}. Pixels that say nothing about this object's shape are
    left out: where the true background has its colour too (a gradient passing through it), and those of the
    other objects (`neighbours`, a mask), which may share its colour and reach into that disc."""
    colour = scenes.COLOURS.index(o["colour"])
    near = _around(o, size, x, y) & (background_labels != colour) & ~neighbours
    blob = near & (labels == colour)
    ious = {}
    for shape in scenes.SHAPES:
        mask = near & scenes.object_mask({**o, "shape": shape}, size)
        ious[shape] = (blob & mask).sum() / max(1, (blob | mask).sum())
    return ious


def _takes_shape(ious, shape):
    """The stated shape matches the pixels about as well as any (within SHAPE_MARGIN)."""
    return ious[shape] >= max(ious.values()) - SHAPE_MARGIN


def _miss(labels, mask, o, background_labels, ious):
    """What a missed object was drawn as: "shape" (its colour is there, in some shape: one of the four masks at its
    place matches its colour's pixels by half or more, or its colour holds most of its pixels but too few of
    them), "absent" (a colour the true background has there holds most of them), or the colour that holds most of
    its pixels instead (which seen pair the model fell back on)."""
    if max(ious.values()) >= HALF:
        return "shape"
    most = np.bincount(labels[mask], minlength=len(scenes.COLOURS)).argmax()
    if scenes.COLOURS[most] == o["colour"]:
        return "shape"
    if most in background_labels[mask]:  # either stripe, any band of a gradient
        return "absent"
    return scenes.COLOURS[most]


def adherence(image, scene):
    """{"objects": [bool per object], "background": bool, "misses": [None, or what a missed object was drawn as
    (_miss)]} for an image [S, S, 3] of a scene dict."""
    size = image.shape[0]
    labels = scenes.nearest_palette_index(image)
    x, y = scenes.pixel_grid(size)
    truth = scenes.nearest_palette_index(scenes.render(scene, size))
    background_labels = scenes.nearest_palette_index(scenes.render_background(scene["background"], size))
    masks = [scenes.object_mask(o, size) for o in scene["objects"]]
    objects, misses = [], []
    for i, o in enumerate(scene["objects"]):
        covered = _share(labels, masks[i], o["colour"]) >= HALF
        # The colour must also take the stated shape, not just cover it: a filled circle covers a ring's pixels
        # and most of a square's. Where even the true scene's pixels do not tell the shapes apart (a gradient
        # band of the object's colour around it; at 64 px a small circle and a small square), coverage is all
        # that can be asked. Size is checked by coverage alone: a right shape drawn larger still passes.
        neighbours = np.zeros((size, size), dtype=bool)
        for j, mask in enumerate(masks):
            if j != i:
                neighbours |= mask
        ious = _shape_ious(labels, o, size, x, y, background_labels, neighbours)
        stated = _takes_shape(ious, o["shape"])
        truth_ious = _shape_ious(truth, o, size, x, y, background_labels, neighbours)
        ambiguous = any(_takes_shape(truth_ious, other) for other in scenes.SHAPES if other != o["shape"])
        objects.append(covered and (stated or ambiguous))
        misses.append(None if objects[-1] else _miss(labels, masks[i], o, background_labels, ious))
    away = np.ones((size, size), dtype=bool)
    for o in scene["objects"]:  # leave a margin around every object
        away &= ~_around(o, size, x, y)
    b = scene["background"]
    if b["kind"] == "solid":
        background = _share(labels, away, b["colours"][0]) >= HALF
    elif b["kind"] == "gradient":
        band = size // 8
        top, bottom = away & (y < band), away & (y >= size - band)
        background = _share(labels, top, b["colours"][0]) >= HALF and _share(labels, bottom, b["colours"][1]) >= HALF
    else:
        expected = scenes.render_background(b, size)
        wanted = scenes.nearest_palette_index(expected)
        background = float((labels[away] == wanted[away]).mean()) >= HALF
    return {"objects": objects, "background": background, "misses": misses}


def rate(hits, total):
    """(rate, 95% half-width) of a binomial proportion."""
    if total == 0:
        return 0.0, 0.0
    p = hits / total
    return p, 1.96 * math.sqrt(max(p * (1 - p), 1e-12) / total)


def difference(a, b):
    """(a - b, 95% half-width) of two independent rates given as (rate, 95% half-width)."""
    return a[0] - b[0], math.hypot(a[1], b[1])


# --------------------------------------------------------------------------- running sjd


class SjdFailed(Exception):
    def __init__(self, message, exit_code):
        super().__init__(message)
        self.exit_code = exit_code


def run_method(sjd, model, prompts_file, out_dir, method, seed, extra):
    base, _, relax = method.partition("+")
    cmd = [sjd, "batch", "--model", model, "--prompts", prompts_file, "--out-dir", out_dir, "--seed", str(seed),
           "--method", base] + extra
    if relax:
        cmd += ["--relax", relax]
    # One OpenMP thread unless told otherwise: a model this small runs fastest that way, and
    # more threads than free cores slow every step down several times on a shared machine.
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    if not os.path.isfile(sjd):
        raise SjdFailed(f"{sjd}: No such file or directory (--sjd: the built sjd)", 2)
    finished = subprocess.run(cmd, stdout=subprocess.DEVNULL, env=env)
    if finished.returncode != 0:  # sjd's own error is on stderr already
        raise SjdFailed(f"`sjd batch --method {method}` exited {finished.returncode} (its error is above)",
                        finished.returncode)
    records = {}
    with open(os.path.join(out_dir, "manifest.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r.get("status") == "ok":
                records[r["index"]] = r
    return records


def score_method(records, eval_scenes, out_dir):
    objects = background = whole = 0
    n_objects = sum(len(s["objects"]) for s in eval_scenes)
    by_kind = {}  # kind -> [right, of]; an image that was not made counts its objects as misses
    misses_by_kind = {}  # kind -> {what it was drawn as: count}, of the objects in images that were made
    for s in eval_scenes:
        for o in s["objects"]:
            by_kind.setdefault(scenes.object_kind(o), [0, 0])[1] += 1
    for i, s in enumerate(eval_scenes):
        if i not in records:
            continue
        result = adherence(read_png(os.path.join(out_dir, records[i]["file"])), s)
        objects += sum(result["objects"])
        for o, right, miss in zip(s["objects"], result["objects"], result["misses"]):
            by_kind[scenes.object_kind(o)][0] += int(right)
            if miss:
                drawn = misses_by_kind.setdefault(scenes.object_kind(o), {})
                drawn[miss] = drawn.get(miss, 0) + 1
        background += result["background"]
        whole += all(result["objects"]) and result["background"]
    n = len(eval_scenes)
    steps = [r["steps"] for r in records.values()]
    tokens = [r["tokens"] for r in records.values()]
    return {
        "images": len(records),
        "object": rate(objects, n_objects),
        "object_by_kind": dict(sorted(by_kind.items())),
        "object_misses_by_kind": {kind: dict(sorted(drawn.items(), key=lambda item: (-item[1], item[0])))
                                  for kind, drawn in sorted(misses_by_kind.items())},
        "background": rate(background, n),
        "scene": rate(whole, n),
        "mean_steps": float(np.mean(steps)),
        "step_compression": float(np.sum(tokens) / np.sum(steps)),
        "seconds_per_image": float(np.mean([r["seconds"] for r in records.values()])),
    }


def read_captions(path):
    """Prompts of a .txt (one a line, `#` comments skipped) or .jsonl ("prompt" fields) file."""
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    if not path.endswith(".jsonl"):
        return [line for line in lines if line and not line.startswith("#")]
    prompts = []
    for number, line in enumerate(lines, 1):
        if line:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("prompt"), str):
                raise ValueError(f"line {number} has no \"prompt\" string")
            prompts.append(record["prompt"])
    return prompts


def print_per_caption(captions, repeat, records, eval_scenes, out_dir):
    """One line per caption: of its `repeat` images, how many are right as a whole, and per part."""
    for c, text in enumerate(captions):
        whole = background = objects = 0
        for i in range(c * repeat, (c + 1) * repeat):
            if i in records:
                result = adherence(read_png(os.path.join(out_dir, records[i]["file"])), eval_scenes[i])
                whole += all(result["objects"]) and result["background"]
                background += result["background"]
                objects += sum(result["objects"])
        print(f"  {whole}/{repeat} right (objects {objects}/{repeat * len(eval_scenes[c * repeat]['objects'])}, "
              f"background {background}/{repeat}): {text}")


def ground_truth_score(eval_scenes):
    """The scorer on the generator's own renders: every check must pass (a scorer sanity check)."""
    results = [adherence(scenes.render(s), s) for s in eval_scenes]
    return all(all(r["objects"]) and r["background"] for r in results)


def reconstruction_score(vq_dir, eval_scenes, image_size):
    """The three rates for the VQGAN's reconstructions of the scenes' ground-truth renders at image_size px
    (the VQGAN is convolutional: one trained at 64 px encodes 128 px scenes to 32 x 32 codes)."""
    import torch  # only this mode needs torch (and the training scripts' VQGAN)
    import train_vq
    model = train_vq.load(vq_dir)  # in eval mode
    objects = background = whole = 0
    for first in range(0, len(eval_scenes), 32):
        chunk = eval_scenes[first:first + 32]
        with torch.no_grad():
            _, codes = model.encode(train_vq.to_pixels(np.stack([scenes.render(s, image_size) for s in chunk])))
            images = train_vq.to_bytes(model.decode_codes(codes)).numpy()
        for image, s in zip(images, chunk):
            result = adherence(image, s)
            objects += sum(result["objects"])
            background += result["background"]
            whole += all(result["objects"]) and result["background"]
    n = len(eval_scenes)
    return {"object": rate(objects, sum(len(s["objects"]) for s in eval_scenes)),
            "background": rate(background, n), "scene": rate(whole, n)}


def grid_indices(eval_scenes, count):
    """The first scenes of each background kind among them in turn, so the grid shows every kind."""
    by_kind = [[i for i, s in enumerate(eval_scenes) if s["background"]["kind"] == kind]
               for kind in scenes.BACKGROUND_KINDS]
    by_kind = [group for group in by_kind if group]  # the evaluation split has three of the five kinds
    order = [i for group in zip(*by_kind) for i in group]
    return order[:count]


def write_grid(path, eval_scenes, records, out_dir, indices):
    """Top row the generator's ground truth, bottom row the model's images, enlarged (nearest neighbour) to at
    least 128 px a side."""
    gap = 4
    cells = []
    for i in indices:
        made = read_png(os.path.join(out_dir, records[i]["file"]))
        scale = -(-128 // made.shape[0])  # rounded up
        truth = scenes.render(eval_scenes[i], made.shape[0])
        cells.append([np.kron(im, np.ones((scale, scale, 1), dtype=np.uint8)) for im in (truth, made)])
    side = cells[0][0].shape[0]
    count = len(indices)
    grid = np.full((2 * side + 3 * gap, count * side + (count + 1) * gap, 3), 255, dtype=np.uint8)
    for c, pair in enumerate(cells):
        for r, im in enumerate(pair):
            y, x = gap + r * (side + gap), gap + c * (side + gap)
            grid[y:y + side, x:x + side] = im
    write_png(path, grid)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=os.path.join(ROOT, "models", "default"))
    parser.add_argument("--sjd", default=os.path.join(ROOT, "build", "sjd"))
    parser.add_argument("--count", type=int, default=48, help="how many scenes to generate")
    parser.add_argument("--split", default="eval", choices=list(scenes.SPLITS),
                        help="eval: captions with a held-out (colour, shape) pair; train: seen combinations "
                             "(use --start past the training scenes)")
    parser.add_argument("--start", type=int, default=0, help="index of the first scene in --split")
    parser.add_argument("--scene-seed", type=int, default=0, help="scenes.py seed the model was trained with")
    parser.add_argument("--seed", type=int, default=1000, help="sampling seed of the first prompt")
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--out-dir", help="default: out/default-model/eval-SPLIT-START (sjd batch resumes there, and "
                                          "refuses a folder made with other prompts or settings)")
    parser.add_argument("--grid", help="write a ground truth / ar grid PNG of the first --grid-count scenes here")
    parser.add_argument("--grid-count", type=int, default=6)
    parser.add_argument("--captions", help="score these captions (one per line, or .jsonl) instead of --split scenes")
    parser.add_argument("--repeat", type=int, default=1, help="with --captions: images per caption (seeds in a row)")
    parser.add_argument("--vq-dir", help="score this VQGAN's reconstructions of the scenes instead (no sjd run)")
    parser.add_argument("--image-size", type=int, default=scenes.IMAGE_SIZE, help="with --vq-dir: pixels per side")
    parser.add_argument("sjd_args", nargs="*", help="after --: more flags for every `sjd batch` run")
    args = parser.parse_args(argv)

    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: at least one image per caption")
    if args.captions:
        try:
            captions = read_captions(args.captions)
            eval_scenes = [scenes.parse_caption(c) for c in captions for _ in range(args.repeat)]
        except (OSError, ValueError) as e:
            print(f"eval_default_model: {args.captions}: {e}", file=sys.stderr)
            return 2
        args.out_dir = args.out_dir or os.path.join(ROOT, "out", "default-model", "eval-captions")
    else:
        args.out_dir = args.out_dir or os.path.join(ROOT, "out", "default-model", f"eval-{args.split}-{args.start}")
        eval_scenes = [scenes.scene(args.scene_seed, args.split, args.start + i) for i in range(args.count)]
    if not ground_truth_score(eval_scenes):
        raise SystemExit("eval_default_model: the scorer fails the generator's own images; fix the scorer first")
    if args.vq_dir:
        r = reconstruction_score(args.vq_dir, eval_scenes, args.image_size)
        print(f"VQGAN reconstructions ({args.count} {args.split} scenes from {args.start}): scene {r['scene'][0]:.3f}"
              f"±{r['scene'][1]:.3f}  object {r['object'][0]:.3f}±{r['object'][1]:.3f}  background "
              f"{r['background'][0]:.3f}±{r['background'][1]:.3f}")
        return 0
    os.makedirs(args.out_dir, exist_ok=True)
    prompts_file = os.path.join(args.out_dir, "prompts.jsonl")
    with open(prompts_file, "w", encoding="utf-8") as f:
        for s in eval_scenes:
            f.write(json.dumps({"prompt": s["caption"]}) + "\n")

    methods = args.methods.split(",")
    first = methods[0]
    results, records_by_method = {}, {}
    for method in methods:
        out_dir = os.path.join(args.out_dir, method)
        try:
            records = run_method(args.sjd, args.model, prompts_file, out_dir, method, args.seed, args.sjd_args)
        except SjdFailed as e:
            print(f"eval_default_model: {e}", file=sys.stderr)
            return 2 if e.exit_code == 2 else 1
        records_by_method[method] = records
        results[method] = score_method(records, eval_scenes, out_dir)
        r = results[method]
        for key in ("scene", "object", "background"):
            r[key + "_minus_" + first] = difference(r[key], results[first][key])
        print(f"{method:16s} scene {r['scene'][0]:.3f}±{r['scene'][1]:.3f}  object {r['object'][0]:.3f}±"
              f"{r['object'][1]:.3f} ({r['object_minus_' + first][0]:+.3f}±{r['object_minus_' + first][1]:.3f} vs "
              f"{first})  background {r['background'][0]:.3f}±{r['background'][1]:.3f}  "
              f"steps {r['mean_steps']:.1f}  compression {r['step_compression']:.2f}x  "
              f"{r['seconds_per_image']:.2f} s/image (latency)", flush=True)
        print("  objects by kind: " + ", ".join(f"{kind} {right}/{of}"
                                               for kind, (right, of) in r["object_by_kind"].items()), flush=True)
        if r["object_misses_by_kind"]:
            print("  misses drawn as (shape: its colour in another shape; absent: background; else the colour "
                  "there): " + "; ".join(f"{kind}: " + ", ".join(f"{drawn} {n}" for drawn, n in misses.items())
                                        for kind, misses in r["object_misses_by_kind"].items()), flush=True)
        if args.captions:
            print_per_caption(captions, args.repeat, records, eval_scenes, out_dir)
    with open(os.path.join(args.out_dir, "results.json"), "w", encoding="utf-8") as f:
        source = ({"captions": args.captions, "repeat": args.repeat} if args.captions else
                  {"split": args.split, "start": args.start, "count": args.count})
        json.dump({**source, "seed": args.seed,
                   "sjd_args": args.sjd_args, "methods": results}, f, indent=2)
        f.write("\n")
    if args.grid:
        indices = grid_indices(eval_scenes, args.grid_count)
        write_grid(args.grid, eval_scenes, records_by_method[first], os.path.join(args.out_dir, first), indices)
        for column, i in enumerate(indices):
            print(f"grid column {column + 1}: {eval_scenes[i]['caption']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

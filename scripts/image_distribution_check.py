#!/usr/bin/env python3
"""Checks on the real default model that decoding methods draw the images `ar` draws, in distribution.

  scripts/image_distribution_check.py --caption "a small green ring at the top, on a white background"
      [--images 1000] [--methods scd-mc,sjd-pac] [--control ar@temperature=0.9] [--cells 8] [--alpha 1e-3]
      [--seed 1000] [--model models/default] [--sjd build/sjd] [--out-dir DIR] [-- more sjd batch flags]

The exactness tests (tests/decoding) compare every lossless method with ar token by token on toy models
whose distribution is known; this is the same question asked of the shipped transformer, where nothing is
known in closed form. Each method draws --images images of one caption with `sjd batch` (its own seeds:
method k uses seeds from --seed + k * 1,000,000, so no two samples share a random stream). Each image is
cut into --cells x --cells regions and each region is read as the palette colour held by the most of its pixels
(scenes.nearest_palette_index): equal token distributions give equal region-colour distributions, and a
region's colour has few values, so a two-sample chi-square on each region is sensitive. A method differs
from ar when some region's p-value is below --alpha / regions (Bonferroni over the regions). Also reported:
the scorer's object, background and whole-scene rates (eval_default_model.adherence) and their difference
from ar with a 95% interval.

A control shows the check can fail at this --images: `ar@temperature=0.9` (the default) samples every token
from a slightly different distribution (0.1 from the bundle's temperature), a change of the kind an inexact
acceptance rule makes; it should be rejected. Entries are `method[+relax][@flag=value]...`: `sjd-pac+lantern` runs a lossy relaxation, and
each `@flag=value` adds `--flag value` to that method's runs (`@`, not a comma, so entries fit in --methods).
Writes results.json into --out-dir (default: a folder named after the caption and --seed under
out/image-distribution); `sjd batch` resumes there, so a stopped run picks
up where it was. Exit code 0 when every --methods entry is consistent with ar and the control is rejected, 1
otherwise (or when sjd fails), 2 for bad arguments.
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_default_model  # noqa: E402
import scenes  # noqa: E402

ROOT = eval_default_model.ROOT
SEED_STRIDE = 1_000_000
MIN_BIN = 10  # colours seen fewer times than this in both samples together share one bin


def parse_entry(entry):
    """'sjd-pac+lantern@temperature=0.9@top-k=64'
    -> ('sjd-pac', 'lantern', ['--temperature', '0.9', '--top-k', '64'])."""
    name, *flags = entry.split("@")
    method, _, relax = name.partition("+")
    extra = []
    for item in flags:
        flag, equals, value = item.partition("=")
        if not equals or not flag or not value:
            raise ValueError(f"{entry}: '{item}' is not flag=value")
        extra += ["--" + flag, value]
    if not method:
        raise ValueError(f"{entry}: no method")
    return method, relax, extra


def region_colours(image, cells):
    """[cells, cells] palette index held by most pixels of each region of an image [S, S, 3]."""
    labels = scenes.nearest_palette_index(image)
    size = labels.shape[0]
    if size % cells:
        raise ValueError(f"--cells {cells} does not divide the image's {size} pixels")
    step = size // cells
    blocks = labels.reshape(cells, step, cells, step).transpose(0, 2, 1, 3).reshape(cells, cells, -1)
    counts = np.apply_along_axis(np.bincount, 2, blocks, minlength=len(scenes.COLOURS))
    return counts.argmax(-1)


def two_sample_p(a, b):
    """p-value of the chi-square test that two count vectors over the same categories come from one distribution.
    Categories with fewer than MIN_BIN samples in both together share one bin (so rare colours add at most a few
    units to the statistic, where alone each could add a large term)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    total = a + b
    small = total < MIN_BIN
    if small.any():
        a = np.append(a[~small], a[small].sum())
        b = np.append(b[~small], b[small].sum())
        total = a + b
    keep = total > 0
    a, b, total = a[keep], b[keep], total[keep]
    if len(total) < 2:
        return 1.0
    na, nb = a.sum(), b.sum()
    ea, eb = total * na / (na + nb), total * nb / (na + nb)
    chi = float(((a - ea) ** 2 / ea + (b - eb) ** 2 / eb).sum())
    dof = len(total) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0, dtype=torch.float64),
                                         torch.tensor(chi / 2.0, dtype=torch.float64)))


def region_p_values(reference, sample):
    """[cells, cells] p-values, region by region, of two stacks of region colours [N, cells, cells]."""
    n_colours = len(scenes.COLOURS)
    cells = reference.shape[1]
    p = np.ones((cells, cells))
    for r in range(cells):
        for c in range(cells):
            p[r, c] = two_sample_p(np.bincount(reference[:, r, c], minlength=n_colours),
                                   np.bincount(sample[:, r, c], minlength=n_colours))
    return p


def draw(args, entry, index, prompts_file):
    """Runs `sjd batch` for one entry; returns (region colours [N, cells, cells], adherence rates, step compression)."""
    method, relax, extra = parse_entry(entry)
    out_dir = os.path.join(args.out_dir, f"{index}-" + entry.replace("@", "_at_").replace("=", "-"))
    records = eval_default_model.run_method(args.sjd, args.model, prompts_file, out_dir,
                                            method + ("+" + relax if relax else ""),
                                            args.seed + index * SEED_STRIDE, extra + args.sjd_args)
    records = {i: r for i, r in records.items() if i < args.images}  # a folder of a longer run holds more
    if len(records) != args.images:
        raise SystemExit(f"image_distribution_check: {entry}: {len(records)} of {args.images} images were made "
                         f"(see {out_dir}/manifest.jsonl)")
    scene = scenes.parse_caption(args.caption)
    colours, objects, backgrounds, wholes = [], 0, 0, 0
    for i in range(args.images):
        image = eval_default_model.read_png(os.path.join(out_dir, records[i]["file"]))
        colours.append(region_colours(image, args.cells))
        result = eval_default_model.adherence(image, scene)
        objects += sum(result["objects"])
        backgrounds += result["background"]
        wholes += all(result["objects"]) and result["background"]
    rates = {"object": eval_default_model.rate(objects, args.images * len(scene["objects"])),
             "background": eval_default_model.rate(backgrounds, args.images),
             "scene": eval_default_model.rate(wholes, args.images)}
    compression = sum(r["tokens"] for r in records.values()) / sum(r["steps"] for r in records.values())
    return np.stack(colours), rates, compression


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--caption", required=True, help="a caption in the scenes' grammar (scenes.parse_caption)")
    parser.add_argument("--images", type=int, default=1000, help="images per method")
    parser.add_argument("--methods", default="scd-mc,sjd-pac", help="compared with ar, comma-separated")
    parser.add_argument("--control", default="ar@temperature=0.9", help="a variant the check should reject "
                        "('' for none)")
    parser.add_argument("--cells", type=int, default=8, help="regions per side")
    parser.add_argument("--alpha", type=float, default=1e-3, help="family-wise significance per method")
    parser.add_argument("--seed", type=int, default=1000, help="first seed of ar; method k starts k * 1e6 higher")
    parser.add_argument("--model", default=os.path.join(ROOT, "models", "default"))
    parser.add_argument("--sjd", default=os.path.join(ROOT, "build", "sjd"))
    parser.add_argument("--out-dir", help="default: out/image-distribution/CAPTION-seedSEED")
    parser.add_argument("sjd_args", nargs="*", help="after --: more flags for every `sjd batch` run")
    args = parser.parse_args(argv)
    try:
        scenes.parse_caption(args.caption)
        entries = ["ar"] + [m for m in args.methods.split(",") if m] + ([args.control] if args.control else [])
        for entry in entries:
            parse_entry(entry)
    except ValueError as e:
        print(f"image_distribution_check: {e}", file=sys.stderr)
        return 2
    if args.images < 2 or args.cells < 1:
        print("image_distribution_check: --images must be at least 2 and --cells at least 1", file=sys.stderr)
        return 2
    if not args.out_dir:
        slug = re.sub(r"[^a-z0-9]+", "-", args.caption.lower()).strip("-")[:60]
        args.out_dir = os.path.join(ROOT, "out", "image-distribution", f"{slug}-seed{args.seed}")
    os.makedirs(args.out_dir, exist_ok=True)
    prompts_file = os.path.join(args.out_dir, "prompts.jsonl")
    with open(prompts_file, "w", encoding="utf-8") as f:
        f.write((json.dumps({"prompt": args.caption}) + "\n") * args.images)

    regions = args.cells * args.cells
    threshold = args.alpha / regions
    print(f"{args.images} images per method of \"{args.caption}\"; {regions} regions; a method differs from ar "
          f"when a region's p < {args.alpha:g} / {regions} = {threshold:.2g}", flush=True)
    reference = ar_rates = None
    results = {}
    labels = []
    for index, entry in enumerate(entries):
        label = entry if entry not in results else f"{entry}#{index}"  # "ar" among --methods: ar against itself
        labels.append(label)
        try:
            colours, rates, compression = draw(args, entry, index, prompts_file)
        except ValueError as e:  # --cells that does not divide the image
            print(f"image_distribution_check: {e}", file=sys.stderr)
            return 2
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"image_distribution_check: {entry}: sjd batch failed ({e}); its folder keeps what was made",
                  file=sys.stderr)
            return 1
        result = {"rates": rates, "step_compression": compression}
        line = (f"{label:24s} object {rates['object'][0]:.3f}  background {rates['background'][0]:.3f}  scene "
                f"{rates['scene'][0]:.3f}  compression {compression:.2f}x")
        if reference is None:
            reference, ar_rates = colours, rates
        else:
            p = region_p_values(reference, colours)
            worst = np.unravel_index(p.argmin(), p.shape)
            result["smallest_p"] = float(p.min())
            result["smallest_p_region"] = [int(worst[0]), int(worst[1])]
            result["regions_below_threshold"] = int((p < threshold).sum())
            result["differs"] = bool(p.min() < threshold)
            for key in rates:
                result[key + "_minus_ar"] = eval_default_model.difference(rates[key], ar_rates[key])
            line += (f"  smallest p {p.min():.2g} (region row {worst[0]}, column {worst[1]}; "
                     f"{result['regions_below_threshold']} below)  object vs ar {result['object_minus_ar'][0]:+.3f}"
                     f"±{result['object_minus_ar'][1]:.3f}  -> {'DIFFERS' if result['differs'] else 'consistent'}")
        results[label] = result
        print(line, flush=True)
    with open(os.path.join(args.out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"caption": args.caption, "images": args.images, "cells": args.cells, "alpha": args.alpha,
                   "seed": args.seed, "sjd_args": args.sjd_args, "methods": results}, f, indent=2)
        f.write("\n")
    control = results[labels[-1]] if args.control else None  # the control runs last
    if control is not None and not control["differs"]:
        print(f"note: the control {args.control} was not rejected: at {args.images} images the check cannot see a "
              "change that small", flush=True)
    compared = labels[1:-1] if args.control else labels[1:]
    return 1 if any(results[label]["differs"] for label in compared) or (control and not control["differs"]) else 0


if __name__ == "__main__":
    sys.exit(main())

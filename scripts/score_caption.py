#!/usr/bin/env python3
"""Scores images against a caption in the default model's language, with the adherence scorer.

  scripts/score_caption.py --caption "a large blue circle on the left, on a yellow background" IMAGE.png...

The caption is read back into a scene (objects: "a SIZE COLOUR SHAPE POSITION"; background: "COLOUR
background", "COLOUR to COLOUR gradient background" or "COLOUR and COLOUR striped background"), as
scripts/scenes.py writes them, and each image is checked as scripts/eval_default_model.py checks its
evaluation images: per object, whether its stated colour covers half of its true shape; the
background; and the whole scene. Prints one line per image and the totals. A caption outside that
language is an error naming what could not be read.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_default_model  # noqa: E402
import scenes  # noqa: E402

COLOUR = "|".join(scenes.COLOURS)
OBJECT = re.compile(rf"\b(small|large) ({COLOUR}) ({'|'.join(scenes.SHAPES)}) "
                    rf"({'|'.join(scenes.POSITION_PHRASES.values())})")
GRADIENT = re.compile(rf"\b({COLOUR}) to ({COLOUR}) gradient background")
STRIPES = re.compile(rf"\b({COLOUR}) and ({COLOUR}) striped background")
SOLID = re.compile(rf"\b({COLOUR}) background")


def scene_of(caption):
    position_of = {phrase: name for name, phrase in scenes.POSITION_PHRASES.items()}
    objects = [{"size": m[0], "colour": m[1], "shape": m[2], "position": position_of[m[3]]}
               for m in OBJECT.findall(caption)]
    if not objects:
        raise ValueError(f"no object phrase ('a small red circle at the top') in {caption!r}")
    for kind, pattern in (("gradient", GRADIENT), ("stripes", STRIPES), ("solid", SOLID)):
        m = pattern.search(caption)
        if m:
            return {"background": {"kind": kind, "colours": list(m.groups())}, "objects": objects}
    raise ValueError(f"no background phrase ('on a white background') in {caption!r}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--caption", required=True)
    p.add_argument("images", nargs="+")
    args = p.parse_args()
    try:
        scene = scene_of(args.caption)
    except ValueError as e:
        sys.exit(f"score_caption.py: {e}")
    objects = backgrounds = wholes = 0
    for path in args.images:
        result = eval_default_model.adherence(eval_default_model.read_png(path), scene)
        whole = all(result["objects"]) and result["background"]
        objects += sum(result["objects"])
        backgrounds += result["background"]
        wholes += whole
        print(f"{path}: objects {sum(result['objects'])}/{len(result['objects'])}, background "
              f"{'yes' if result['background'] else 'no'}, scene {'yes' if whole else 'no'}")
    n = len(args.images)
    print(f"total: objects {objects}/{n * len(scene['objects'])}, backgrounds {backgrounds}/{n}, scenes {wholes}/{n}")


if __name__ == "__main__":
    main()

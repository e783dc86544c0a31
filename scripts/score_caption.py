#!/usr/bin/env python3
"""Scores images against a caption in the default model's language, with the adherence scorer.

  scripts/score_caption.py --caption "a large blue circle on the left, on a yellow background" IMAGE.png...

The caption is read back into a scene by scenes.parse_caption (the generator's grammar: "a SIZE COLOUR
SHAPE POSITION" objects, "COLOUR background", "COLOUR to COLOUR gradient background" or "COLOUR and
COLOUR striped background", in one of its sentence forms), and each image is checked as
scripts/eval_default_model.py checks its evaluation images: per object, whether its stated colour
covers half of its true shape and takes that shape; the background; and the whole scene. Prints one
line per image, with what each missed object was drawn as ("shape": its colour in another shape;
"absent": the background there; else the colour that took its place), and the totals. A caption
outside that grammar is refused (exit code 2) with what could not be read.
To generate images of captions and score them in one go, use eval_default_model.py --captions.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_default_model  # noqa: E402
import scenes  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--caption", required=True)
    p.add_argument("images", nargs="+")
    args = p.parse_args()
    try:
        scene = scenes.parse_caption(args.caption)
    except ValueError as e:
        print(f"score_caption.py: {e}", file=sys.stderr)
        return 2
    objects = backgrounds = wholes = 0
    for path in args.images:
        try:
            image = eval_default_model.read_png(path)
        except (OSError, ValueError) as e:  # a missing file or one that is not a PNG: one line, not a traceback
            text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            print(f"score_caption.py: {text if text.startswith(path) else f'{path}: {text}'}", file=sys.stderr)
            return 2
        result = eval_default_model.adherence(image, scene)
        whole = all(result["objects"]) and result["background"]
        objects += sum(result["objects"])
        backgrounds += result["background"]
        wholes += whole
        missed = "; ".join(f"{o['size']} {o['colour']} {o['shape']} ({o['position']}) drawn as {miss}"
                           for o, miss in zip(scene["objects"], result["misses"]) if miss)
        print(f"{path}: objects {sum(result['objects'])}/{len(result['objects'])}, background "
              f"{'yes' if result['background'] else 'no'}, scene {'yes' if whole else 'no'}"
              + (f"; {missed}" if missed else ""))
    n = len(args.images)
    print(f"total: objects {objects}/{n * len(scene['objects'])}, backgrounds {backgrounds}/{n}, scenes {wholes}/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

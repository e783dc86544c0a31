#!/usr/bin/env python3
"""How new the image codes of held-out colour-shape pairs are to the transformer that trained on them.

Encodes evaluation scenes with a VQGAN and, for each object, takes the code cells it covers (at least half of a
cell's pixels) and the neighbour pairs (left-right and up-down) that touch them, then counts how many of those
pairs never occur in the training codes (`codes.npz`, written by train_default_model.py). A model that learnt
which code follows which cannot easily emit a pair it never saw; docs/default_model.md relates this to which
held-out pairs the default model draws. Also counts the objects whose first code (in raster order, the first cell
at least a quarter covered), together with the codes above and left of it, never occurs so in training: about
where an object's colour is chosen.

  scripts/code_novelty.py --vq-dir out/v2/vq --codes out/v3/hf/codes.npz --image-size 128
"""
import argparse
import collections
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenes  # noqa: E402
import train_vq  # noqa: E402

CELL = 4  # pixels per code cell side: the default model's VQGAN downsamples 4x
OUTSIDE = 65535  # the code "above" the top row and "left of" the first column: no codebook is this large


def neighbour_pairs(grid):
    """(left-right, up-down) neighbour pairs as ids code * 65536 + next code, each shaped like their positions."""
    g = grid.astype(np.int64)
    return g[:, :-1] * 65536 + g[:, 1:], g[:-1, :] * 65536 + g[1:, :]


def first_code_contexts(grid):
    """Ids (code above) * 2**32 + (code left) * 2**16 + code for every cell, shaped like the grid; OUTSIDE above the
    top row and left of the first column."""
    g = np.pad(grid.astype(np.int64), ((1, 0), (1, 0)), constant_values=OUTSIDE)
    return (g[:-1, 1:] << 32) + (g[1:, :-1] << 16) + g[1:, 1:]


def first_cell(share):
    """(row, column) of an object's first code cell in raster order: the first with at least a quarter of its pixels
    in the object (cells before it hold a few of its pixels at most: up to 12% at 128 px), or where none is, the
    first with any. share: the object's share of each cell's pixels [cells, cells]."""
    flat = share.ravel()
    candidates = np.flatnonzero(flat >= 0.25)
    first = candidates[0] if len(candidates) else np.flatnonzero(flat > 0)[0]
    return divmod(int(first), share.shape[1])


def novelty(vq_dir, codes_path, image_size, seed, start, count):
    """({kind: [objects, pairs, pairs never in training, objects whose first code's context never is]} over eval
    scenes start..start+count-1, how many distinct codes the training codes hold)."""
    train = np.load(codes_path)["codes"]
    if train.shape[1:] != (image_size // CELL, image_size // CELL):
        raise ValueError(f"{codes_path} holds {train.shape[1]} x {train.shape[2]} code grids, not the "
                         f"{image_size // CELL} x {image_size // CELL} of --image-size {image_size}")
    seen, seen_contexts = set(), set()
    for grid in train:
        across, down = neighbour_pairs(grid)
        seen.update(across.ravel().tolist())
        seen.update(down.ravel().tolist())
        seen_contexts.update(first_code_contexts(grid).ravel().tolist())
    model = train_vq.load(vq_dir)
    cells = image_size // CELL
    stats = collections.defaultdict(lambda: [0, 0, 0, 0])
    with torch.no_grad():
        for first in range(start, start + count, 25):
            batch = [scenes.scene(seed, "eval", i) for i in range(first, min(start + count, first + 25))]
            _, codes = model.encode(train_vq.to_pixels(np.stack([scenes.render(s, image_size) for s in batch])))
            for s, grid in zip(batch, codes.numpy()):
                across, down = neighbour_pairs(grid)
                contexts = first_code_contexts(grid)
                for o in s["objects"]:
                    share = scenes.object_mask(o, image_size).reshape(cells, CELL, cells, CELL).mean((1, 3))
                    covered = share >= 0.5
                    pairs = np.concatenate([across[covered[:, :-1] | covered[:, 1:]],
                                            down[covered[:-1, :] | covered[1:, :]]])
                    kind = stats[scenes.object_kind(o)]
                    kind[0] += 1
                    kind[1] += len(pairs)
                    kind[2] += sum(p not in seen for p in pairs.tolist())
                    kind[3] += int(contexts[first_cell(share)]) not in seen_contexts
    return dict(stats), int((np.bincount(train.reshape(-1).astype(np.int64)) > 0).sum())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vq-dir", required=True, help="a train_vq.py folder (vqgan.ckpt)")
    parser.add_argument("--codes", required=True, help="the training codes: train_default_model.py's codes.npz")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=200, help="first eval scene (200..399 are the tuning scenes)")
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args(argv)
    for path in (args.codes, os.path.join(args.vq_dir, "vqgan.ckpt")):
        if not os.path.isfile(path):
            print(f"code_novelty: {path} is not a file", file=sys.stderr)
            return 2
    torch.set_num_threads(1)  # small batches of 64-128 px images: more threads only wait on each other
    try:
        stats, distinct = novelty(args.vq_dir, args.codes, args.image_size, args.seed, args.start, args.count)
    except ValueError as error:
        print(f"code_novelty: {error}", file=sys.stderr)
        return 2
    print(f"training codes: {distinct} distinct codes occur in {args.codes}")
    for kind in sorted(stats):
        objects, pairs, unseen, new_first = stats[kind]
        print(f"{kind:24s} {objects:4d} objects  {pairs:6d} neighbour pairs  never in training "
              f"{unseen / max(pairs, 1):6.1%}  first code new with its neighbours above and left "
              f"{new_first / objects:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Sweeps the lossy relaxations' parameters against their lossless bases on a bundle.

  scripts/sweep_relaxation.py [--model models/default] [--sjd build/sjd] [--count 8] [--seeds 2]
      [--windows auto,64] [--bases sjd,sjd-pac] [--out-dir out/relax-sweep]

For each window setting (auto: the planner's choice; a number: a fixed --window) it runs
`sjd compare` on --count held-out captions of scenes.py x --seeds seeds, once for the lossless
bases and once per relaxation setting (uniform: --delta; cool: --delta, --nu; lantern:
--lantern-k, --lantern-lambda) with every base as name:relaxation, and prints a Markdown table:
mean steps per image, step compression, seconds per image, and the steps of the lossless base
divided by the relaxation's ("fewer steps": above 1 the relaxation is faster in steps).
Each compare folder is kept under --out-dir, so an interrupted sweep resumes.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# (relaxation, flags) settings to measure.
SETTINGS = [("uniform", {"delta": d}) for d in (1.1, 1.5, 2.0, 3.0)] + \
           [("cool", {"delta": d, "nu": nu}) for d in (1.1, 2.0) for nu in (0.7, 0.2, 0.05, 0.01)] + \
           [("lantern", {"lantern-k": k, "lantern-lambda": lam}) for k in (10,) for lam in (2.0, 4.0)]


def compare(args, methods, window, flags, name):
    out_dir = os.path.join(args.out_dir, f"L{window}", name)
    cmd = [args.sjd, "compare", "--model", args.model, "--prompts", args.prompts, "--seeds", str(args.seeds),
           "--seed", "1000", "--methods", ",".join(methods), "--out-dir", out_dir, "--quiet"]
    if window != "auto":
        cmd += ["--window", window]
    for key, value in flags.items():
        cmd += [f"--{key}", str(value)]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    with open(os.path.join(out_dir, "compare.json"), encoding="utf-8") as f:
        return json.load(f)["methods"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(ROOT, "models/default"))
    p.add_argument("--sjd", default=os.path.join(ROOT, "build/sjd"))
    p.add_argument("--count", type=int, default=8)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--windows", default="auto,64")
    p.add_argument("--bases", default="sjd,sjd-pac")
    p.add_argument("--out-dir", default=os.path.join(ROOT, "out/relax-sweep"))
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    args.prompts = os.path.join(args.out_dir, "prompts.jsonl")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts/scenes.py"), "--split", "eval", "--count",
                    str(args.count), "--out-jsonl", args.prompts, "--prompts"], check=True)
    bases = args.bases.split(",")
    print("| window | method | relaxation | parameters | steps / image | step compression | s / image |"
          " fewer steps than lossless |")
    print("|---|---|---|---|---|---|---|---|")
    for window in args.windows.split(","):
        lossless = {row["entry"]: row for row in compare(args, bases, window, {}, "lossless")}
        for base in bases:
            row = lossless[base]
            print(f"| {window} | {base} | none | | {row['steps']:.1f} | {row['step_compression']:.2f}x |"
                  f" {row['seconds']:.3f} | 1.00x |", flush=True)
        for relax, flags in SETTINGS:
            name = relax + "-" + "-".join(f"{k}{v}" for k, v in flags.items())
            rows = compare(args, [f"{b}:{relax}" for b in bases], window, flags, name)
            for base, row in zip(bases, rows):
                params = ", ".join(f"{k} {v}" for k, v in flags.items())
                ratio = lossless[base]["steps"] / row["steps"]
                print(f"| {window} | {base} | {relax} | {params} | {row['steps']:.1f} |"
                      f" {row['step_compression']:.2f}x | {row['seconds']:.3f} | {ratio:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Measures a bundle's acceptance prior for automatic windows and (with --write) stores it in bundle.json.

  scripts/window_prior.py --model models/default --prompts PROMPTS.jsonl [--inits repeat-up,random] [--write]

For each draft init, one `sjd batch` run over the prompts with a fixed window (`--method sjd -L 8`, so the
planner's own choices cannot bias what is measured) at the bundle's other defaults; the manifest's
`drafts_by_age` of every image are summed into the rate at which chain drafts passed at age 0, 1, and 2 or
older (age: how many windows had computed p for the draft's position). `--write` stores them as
bundle.json's "window_prior" {init: [rate0, rate1, rate2+]}, which the planner starts every image from
and a batch plans from alone (docs/methods.md, "Automatic windows"); sjd uses it only for runs at the
bundle's default temperature, top-k and cfg, which is what this measures. Use prompts the model was not judged
on, and enough of them: a rate resting on fewer than --min-tested drafts is refused (exit code 2), as is a
missing bundle or prompt file. The rates depend on the model and its sampling settings, not on the machine.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

AGES = 3  # 0, 1, and 2 or older
HIGHEST = 0.99  # what sjd accepts: a rate of 1 would promise endless windows (lib/engine/window_prior.cpp)


def fail(message):
    print(f"window_prior.py: {message}", file=sys.stderr)
    sys.exit(2)


def age_bin(label):
    """A manifest age label ("0", "1", ..., "11+") to its bin: 0, 1, or 2 for every older one."""
    return min(int(label.rstrip("+")), AGES - 1)


def sum_by_age(manifest_path):
    tested = [0] * AGES
    accepted = [0] * AGES
    images = 0
    with open(manifest_path) as f:
        for line_number, line in enumerate(f, 1):
            record = json.loads(line)
            if record.get("status") != "ok":
                fail(f"{manifest_path}:{line_number}: an image failed: {record.get('error', record)}")
            images += 1
            for entry in record["drafts_by_age"]:
                b = age_bin(entry["age"])
                tested[b] += entry["tested"]
                accepted[b] += entry["accepted"]
    return images, tested, accepted


def stored_rates(tested, accepted):
    """The rates bundle.json gets: accepted / tested per age, three decimals, at most what sjd takes."""
    return [min(round(a / t, 3), HIGHEST) for a, t in zip(accepted, tested)]


def measure(sjd, model, prompts, init, window, limit):
    with tempfile.TemporaryDirectory(prefix="window_prior_") as out_dir:
        command = [sjd, "batch", "--model", model, "--prompts", prompts, "--out-dir", out_dir, "--method", "sjd",
                   "-L", str(window), "--init", init, "--quiet"]
        if limit:
            command += ["--limit", str(limit)]
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            fail(f"{' '.join(command)} exited with {run.returncode}: {run.stderr.strip()}")
        return sum_by_age(os.path.join(out_dir, "manifest.jsonl"))


def write_prior(bundle_json, init, rates):
    with open(bundle_json) as f:
        bundle = json.load(f)
    bundle.setdefault("window_prior", {})[init] = rates
    # Replace the file only once the new one is whole: an interrupted write must not cost the bundle.
    directory = os.path.dirname(os.path.abspath(bundle_json))
    with tempfile.NamedTemporaryFile("w", dir=directory, suffix=".tmp", delete=False) as f:
        json.dump(bundle, f, indent=2)
        f.write("\n")
    os.chmod(f.name, os.stat(bundle_json).st_mode & 0o7777)  # the temporary file's 0600 is not the bundle's
    os.replace(f.name, bundle_json)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="bundle directory")
    p.add_argument("--prompts", required=True, help="prompt file (.txt, .jsonl, .tsv/.csv as `sjd batch` reads)")
    p.add_argument("--inits", default="repeat-up,random", help="comma-separated draft inits to measure")
    p.add_argument("--window", type=int, default=8, help="the fixed chain length of the measuring runs")
    p.add_argument("--limit", type=int, default=0, help="only the first N prompts (0: all)")
    p.add_argument("--min-tested", type=int, default=200, help="fewest drafts a rate may rest on")
    p.add_argument("--sjd", default="build/sjd", help="the sjd program")
    p.add_argument("--write", action="store_true", help="store the rates in the bundle's bundle.json")
    args = p.parse_args()
    bundle_json = os.path.join(args.model, "bundle.json")
    for path, what in ((bundle_json, "bundle"), (args.prompts, "prompt file"), (args.sjd, "sjd program")):
        if not os.path.isfile(path):
            fail(f"{path}: no such {what}")
    if args.window < 1:
        fail(f"--window {args.window}: must be at least 1")
    if args.min_tested < 1:
        fail(f"--min-tested {args.min_tested}: must be at least 1")
    measured = {}
    for init in [i.strip() for i in args.inits.split(",") if i.strip()]:
        images, tested, accepted = measure(args.sjd, args.model, args.prompts, init, args.window, args.limit)
        for age in range(AGES):
            if tested[age] < args.min_tested:
                fail(f"init {init}: only {tested[age]} drafts of age {age}{'+' if age == AGES - 1 else ''} "
                     f"were tested over {images} images (fewer than --min-tested {args.min_tested}): use more prompts")
        print(f"{init}: ages 0 / 1 / 2+ accepted {' / '.join(f'{a / t:.3f}' for a, t in zip(accepted, tested))} "
              f"(tested {' / '.join(map(str, tested))}, {images} images)")
        measured[init] = stored_rates(tested, accepted)
        if any(a / t > HIGHEST for a, t in zip(accepted, tested)):
            print(f"{init}: rates above {HIGHEST} are stored as {HIGHEST}, the most sjd takes")
    if args.write:
        for init, rates in measured.items():
            write_prior(bundle_json, init, rates)
        print(f"wrote window_prior for {', '.join(measured)} into {bundle_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

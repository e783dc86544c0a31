#!/usr/bin/env python3
"""Store the step-cost profiles a device check measured in a bundle's bundle.json.

  python3 scripts/step_cost_into_bundle.py RESULTS_MD BUNDLE_DIR [--keys cuda-bf16,cuda-f32]

RESULTS_MD is the results.md that `scripts/device_check.sh OUT calibrate` returned: its calibrate section
names each profile (`- cuda-bf16: ok in 41 s`) and prints it in a ```json block under that line. Every
profile that finished goes into BUNDLE_DIR/bundle.json under "step_cost", by its key; the last run of a key
wins, since device_check appends its runs to one results.md. bundle.json is rewritten whole, atomically,
as `sjd bench --calibrate --into-bundle` writes it.

Why: the device machine is lent for minutes and a fresh one forgets what the last call wrote, so the
profiles measured on the GPU reach the bundle here, between its calls (the next call then plans its
automatic windows from them) and for the commit that keeps them. `sjd inspect --model BUNDLE_DIR` lists
the profiles afterwards, read as a generation reads them.
Exit 2 with a message naming the file and the profile when a profile or bundle.json is malformed.
"""
import argparse
import json
import os
import re
import sys
import tempfile

PROFILE_LINE = re.compile(r"^- ((?:cpu|cuda)-(?:f32|bf16|f16)): ok in ")


class InputError(Exception):
    pass


def profiles_in(results_path):
    """{key: profile} of every calibrate line that finished, the last of each key."""
    try:
        lines = open(results_path, encoding="utf-8").read().splitlines()
    except OSError as e:
        raise InputError(f"{results_path}: {e.strerror}")
    found = {}
    for i, line in enumerate(lines):
        match = PROFILE_LINE.match(line)
        if not match:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```json":
            raise InputError(f"{results_path}:{i + 1}: {match.group(1)} finished but no ```json block follows")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise InputError(f"{results_path}:{i + 2}: the ```json block of {match.group(1)} is not closed")
        text = "\n".join(lines[i + 2:end])
        try:
            found[match.group(1)] = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{results_path}:{i + 3}: {match.group(1)}: invalid JSON: {e.msg}")
    return found


def check_profile(profile, where):
    """The shape StepCostProfile::from_json reads (sjd checks the rest: rising tokens, positive times)."""
    if not isinstance(profile, dict) or not isinstance(profile.get("name"), str):
        raise InputError(f"{where}: expected an object with a \"name\"")
    curves = profile.get("curves")
    if not isinstance(curves, list) or not curves:
        raise InputError(f"{where}/curves: expected a non-empty list")
    for c, curve in enumerate(curves):
        at = f"{where}/curves/{c}"
        if not isinstance(curve, dict) or not isinstance(curve.get("rows"), int) or curve["rows"] < 1:
            raise InputError(f"{at}/rows: expected a positive integer")
        points = curve.get("points")
        if not isinstance(points, list) or not points:
            raise InputError(f"{at}/points: expected a non-empty list")
        for point in points:
            if (not isinstance(point, list) or len(point) != 2 or not isinstance(point[0], int)
                    or not isinstance(point[1], (int, float)) or isinstance(point[1], bool)):
                raise InputError(f"{at}/points: each point is [tokens, ms], not {json.dumps(point)}")


def write_atomically(path, text):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".bundle.json.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, os.stat(path).st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="results.md of scripts/device_check.sh ... calibrate")
    parser.add_argument("bundle", help="the bundle directory (its bundle.json is rewritten)")
    parser.add_argument("--keys", help="only these profiles, comma-separated (default: every one that finished)")
    args = parser.parse_args(argv)

    profiles = profiles_in(args.results)
    if args.keys:
        wanted = [k for k in args.keys.split(",") if k]
        missing = [k for k in wanted if k not in profiles]
        if missing:
            raise InputError(f"{args.results}: no finished profile for {', '.join(missing)}")
        profiles = {k: profiles[k] for k in wanted}
    if not profiles:
        raise InputError(f"{args.results}: no step-cost profile finished (a calibrate line reading '- cuda-bf16: ok in ...')")
    for key, profile in profiles.items():
        check_profile(profile, f"{args.results}: {key}")

    bundle_json = os.path.join(args.bundle, "bundle.json")
    try:
        bundle = json.load(open(bundle_json, encoding="utf-8"))
    except OSError as e:
        raise InputError(f"{bundle_json}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise InputError(f"{bundle_json}: invalid JSON: {e.msg} (line {e.lineno})")
    if not isinstance(bundle, dict):
        raise InputError(f"{bundle_json}: expected an object")
    step_cost = bundle.setdefault("step_cost", {})
    if not isinstance(step_cost, dict):
        raise InputError(f"{bundle_json}: /step_cost: expected an object of profiles by device-dtype")
    for key, profile in profiles.items():
        print(f"{key}: {'replaced' if key in step_cost else 'added'} ({profile['name']})")
        step_cost[key] = profile
    write_atomically(bundle_json, json.dumps(bundle, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {bundle_json}")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except InputError as e:
        print(f"step_cost_into_bundle: {e}", file=sys.stderr)
        sys.exit(2)

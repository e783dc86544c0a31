#!/usr/bin/env python3
"""Speed of a text tokenizer as `sjd tokenize` uses it: the time to load it, and per prompt.

Targets for the Qwen tiktoken vocabulary of Emu3 (docs/benchmarks.md): load < 0.5 s, a 100-word prompt
< 1 ms. Prints figures and asserts nothing: timings belong in benchmarks, not in tests.

    scripts/bench_tokenizer.py [--sjd build/sjd] [--tokenizer FILE] [--options JSON] [--prompts 1000]

Default tokenizer: the Qwen vocabulary of the shared data folder, with {"qwen_specials": true}. Each
figure is the best of three runs of the whole process, less a process that only starts (`sjd --version`).
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROMPT = (
    "A photograph of an astronaut riding a horse on the surface of the moon, with the Earth rising over the "
    "horizon behind them, rendered in the style of a vintage oil painting with warm golden light, soft brush "
    "strokes, dramatic shadows, and a sense of quiet wonder; the horse is white with a flowing mane, the "
    "astronaut wears a classic white suit with a reflective gold visor, dust kicks up from the hooves, distant "
    "craters dot the grey landscape, stars are faintly visible in the black sky, and the whole scene feels both "
    "absurd and majestic, like a dream remembered at dawn by a child who loves space."
)


def best_of_three(command):
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sjd", default=str(ROOT / "build" / "sjd"))
    parser.add_argument("--tokenizer", default=str(ROOT.parent / "shared/data/tokenizers/qwen/qwen.tiktoken"))
    parser.add_argument("--options", default='{"qwen_specials": true}')
    parser.add_argument("--prompts", type=int, default=1000, help="prompts encoded by one process")
    args = parser.parse_args()
    for need in (args.sjd, args.tokenizer):
        if not pathlib.Path(need).is_file():
            sys.exit(f"bench_tokenizer: {need} not found")
    tokenize = [args.sjd, "tokenize", "--tokenizer", args.tokenizer, "--options", args.options]
    with tempfile.TemporaryDirectory() as work:
        lines = pathlib.Path(work) / "prompts.jsonl"
        lines.write_text((json.dumps(PROMPT) + "\n") * args.prompts)
        start_only = best_of_three([args.sjd, "--version"])
        one = best_of_three(tokenize + [PROMPT])
        many = best_of_three(tokenize + ["--json-lines", str(lines)])
    tokens = len(json.loads(subprocess.run(tokenize + [PROMPT], check=True, capture_output=True, text=True).stdout))
    print(f"tokenizer: {args.tokenizer}")
    print(f"process start (sjd --version): {start_only:.3f} s")
    print(f"load + one {len(PROMPT.split())}-word prompt ({tokens} tokens), beyond process start: "
          f"{one - start_only:.3f} s")
    print(f"per prompt over {args.prompts} prompts: {(many - one) * 1000 / (args.prompts - 1):.4f} ms")


if __name__ == "__main__":
    main()
